package syncer_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// mountEnv is a node whose paths all lie below one allowed read-write
// prefix, base: podsync's root and log directories, a runtime's root,
// state and socket (all denied), a data directory pods may use, and a
// read-only prefix inside it. outside is beside base, in no prefix.
type mountEnv struct {
	h                       *syncertest.Harness
	rec                     *recordingRuntime
	base, data, ro, outside string
	root, store, logs       string
	rtRoot, rtState, rtSock string
	policy                  admit.Policy
	outsideBefore           []string
}

func newMountEnv(t *testing.T) *mountEnv {
	t.Helper()
	requireRoot(t)
	base, outside := t.TempDir(), t.TempDir()
	e := &mountEnv{
		rec: &recordingRuntime{}, base: base, outside: outside,
		data: filepath.Join(base, "data"), ro: filepath.Join(base, "ro-area"),
		root: filepath.Join(base, "podsync"), logs: filepath.Join(base, "pods-logs"),
		rtRoot: filepath.Join(base, "containerd", "root"), rtState: filepath.Join(base, "containerd", "state"),
		rtSock: filepath.Join(base, "run", "containerd.sock"),
	}
	e.store = filepath.Join(e.root, "podsync.db")
	for _, d := range []string{e.data, e.ro, e.root, e.logs, e.rtRoot, e.rtState, filepath.Dir(e.rtSock)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{e.store, filepath.Join(outside, "passwd"), filepath.Join(e.ro, "file"), filepath.Join(e.rtRoot, "secret")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("unix", e.rtSock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	e.policy = admit.Policy{
		AllowedHostPaths: []admit.HostPathPrefix{{Path: base}, {Path: e.ro, ReadOnly: true}},
		DeniedHostPaths: []admit.DeniedHostPath{
			{Path: e.root, Why: "podsync's root directory (--root-dir)"},
			{Path: e.store, Why: "podsync's store"},
			{Path: e.logs, Why: "the pod log directory (--pod-log-dir)"},
			{Path: e.rtRoot, Why: "the container runtime's root directory"},
			{Path: e.rtState, Why: "the container runtime's state directory"},
			{Path: e.rtSock, Why: "the container runtime's socket"},
		},
	}
	e.h = syncertest.New(t, e.rec.wrap, func(o *syncer.SyncerOptions) {
		o.Config.RootDir, o.Config.PodLogDir, o.HostPaths = e.root, e.logs, e.policy
	})
	e.outsideBefore = tree(t, outside)
	return e
}

// tree lists what is below dir (not following links).
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		out = append(out, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *mountEnv) symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// emptyDir is the host directory of the pod's emptyDir "vol", created
// ahead of the pass so that a row can plant links in it (what a container
// of the pod would do).
func (e *mountEnv) emptyDir(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	dir := criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "vol", e.h.Cfg)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sync runs a pass and returns its error or its first failed step's.
func (e *mountEnv) sync(pod *corev1.Pod) error {
	res, err := e.h.TrySync(pod)
	if err != nil {
		return err
	}
	for _, st := range res.Steps {
		if st.Err != nil {
			return st.Err
		}
	}
	return nil
}

func hostPathVolume(path string, typ corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: "vol", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(typ)}}}
}

var emptyDirVolume = corev1.Volume{Name: "vol", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}

// TestMountAttacksAreRefused: one row per way a pod could get the runtime
// to mount something outside its volume or its allowed prefix, or
// podsync's or the runtime's own files. Each row plants what a container
// (or a careless operator) would, runs a pass, and shows the container
// refused (CreateContainerConfigError or a failed volume step, wrapping
// ErrInvalidSpec) with a reason naming what was refused; nothing is
// mounted below the pod directory, no container is created, and nothing
// outside is created or changed.
func TestMountAttacksAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		volume  func(e *mountEnv) corev1.Volume
		subPath string
		plant   func(t *testing.T, e *mountEnv, pod *corev1.Pod)
		want    []string // in the error
	}{
		{name: "subPath with ..", volume: func(*mountEnv) corev1.Volume { return emptyDirVolume },
			subPath: "../../../../etc", want: []string{"'..'"}},
		{name: "subPath absolute", volume: func(*mountEnv) corev1.Volume { return emptyDirVolume },
			subPath: "/etc", want: []string{"absolute"}},
		{name: "subPath through a link to /", volume: func(*mountEnv) corev1.Volume { return emptyDirVolume },
			subPath: "link/etc", plant: func(t *testing.T, e *mountEnv, pod *corev1.Pod) {
				e.symlink(t, "/", filepath.Join(e.emptyDir(t, pod), "link"))
			}, want: []string{`"link"`, "symbolic link"}},
		{name: "subPath through a relative link out of the volume", volume: func(*mountEnv) corev1.Volume { return emptyDirVolume },
			subPath: "d/up/passwd", plant: func(t *testing.T, e *mountEnv, pod *corev1.Pod) {
				e.symlink(t, strings.Repeat("../", 20)+e.outside[1:], filepath.Join(e.emptyDir(t, pod), "d", "up"))
			}, want: []string{`"d/up"`, "symbolic link"}},
		{name: "subPath of a hostPath through a link out of it", volume: func(e *mountEnv) corev1.Volume {
			return hostPathVolume(e.data, corev1.HostPathDirectory)
		}, subPath: "link", plant: func(t *testing.T, e *mountEnv, _ *corev1.Pod) {
			e.symlink(t, e.outside, filepath.Join(e.data, "link"))
		}, want: []string{`"link"`, "symbolic link"}},
		{name: "hostPath through a link to / under an allowed prefix", volume: func(e *mountEnv) corev1.Volume {
			return hostPathVolume(filepath.Join(e.data, "link", "etc"), corev1.HostPathUnset)
		}, plant: func(t *testing.T, e *mountEnv, _ *corev1.Pod) { e.symlink(t, "/", filepath.Join(e.data, "link")) },
			want: []string{"leads out of its allowed prefix"}},
		{name: "hostPath through a relative link out of the prefix", volume: func(e *mountEnv) corev1.Volume {
			return hostPathVolume(filepath.Join(e.data, "up", filepath.Base(e.outside)), corev1.HostPathDirectory)
		}, plant: func(t *testing.T, e *mountEnv, _ *corev1.Pod) { e.symlink(t, "../..", filepath.Join(e.data, "up")) },
			want: []string{"leads out of its allowed prefix"}},
		{name: "DirectoryOrCreate through a link creates nothing outside", volume: func(e *mountEnv) corev1.Volume {
			return hostPathVolume(filepath.Join(e.data, "link", "newdir"), corev1.HostPathDirectoryOrCreate)
		}, plant: func(t *testing.T, e *mountEnv, _ *corev1.Pod) { e.symlink(t, e.outside, filepath.Join(e.data, "link")) },
			want: []string{"leads out of its allowed prefix"}},
		{name: "FileOrCreate through a dangling link creates nothing outside", volume: func(e *mountEnv) corev1.Volume {
			return hostPathVolume(filepath.Join(e.data, "f"), corev1.HostPathFileOrCreate)
		}, plant: func(t *testing.T, e *mountEnv, _ *corev1.Pod) {
			e.symlink(t, filepath.Join(e.outside, "created"), filepath.Join(e.data, "f"))
		}, want: []string{"leads out of its allowed prefix"}},
		{name: "hostPath outside every prefix", volume: func(e *mountEnv) corev1.Volume {
			return hostPathVolume(e.outside, corev1.HostPathDirectory)
		}, want: []string{"outside the node's allowed paths"}},
		{name: "podsync's root directory", volume: func(e *mountEnv) corev1.Volume { return hostPathVolume(e.root, corev1.HostPathUnset) },
			want: []string{"is " + "", "podsync's root directory (--root-dir)", "always refuses"}},
		{name: "podsync's store", volume: func(e *mountEnv) corev1.Volume { return hostPathVolume(e.store, corev1.HostPathFile) },
			want: []string{"podsync's store", "always refuses"}},
		{name: "the pod log directory", volume: func(e *mountEnv) corev1.Volume { return hostPathVolume(e.logs, corev1.HostPathUnset) },
			want: []string{"the pod log directory", "always refuses"}},
		{name: "the runtime's root", volume: func(e *mountEnv) corev1.Volume { return hostPathVolume(e.rtRoot, corev1.HostPathUnset) },
			want: []string{"the container runtime's root directory"}},
		{name: "the runtime's state", volume: func(e *mountEnv) corev1.Volume { return hostPathVolume(e.rtState, corev1.HostPathUnset) },
			want: []string{"the container runtime's state directory"}},
		{name: "the runtime's socket", volume: func(e *mountEnv) corev1.Volume { return hostPathVolume(e.rtSock, corev1.HostPathSocket) },
			want: []string{"the container runtime's socket"}},
		{name: "inside the runtime's root", volume: func(e *mountEnv) corev1.Volume {
			return hostPathVolume(filepath.Join(e.rtRoot, "secret"), corev1.HostPathFile)
		}, want: []string{"lies inside " + "", "the container runtime's root directory"}},
		{name: "an ancestor of the denied paths (the prefix itself)", volume: func(e *mountEnv) corev1.Volume {
			return hostPathVolume(e.base, corev1.HostPathDirectory)
		}, want: []string{"contains", "always refuses"}},
		{name: "the runtime's root through a link under the prefix (inode check)", volume: func(e *mountEnv) corev1.Volume {
			return hostPathVolume(filepath.Join(e.data, "alias"), corev1.HostPathDirectory)
		}, plant: func(t *testing.T, e *mountEnv, _ *corev1.Pod) {
			e.symlink(t, "../containerd/root", filepath.Join(e.data, "alias"))
		}, want: []string{"what it resolves to is", "the container runtime's root directory"}},
		{name: "the store through a link under the prefix (inode check)", volume: func(e *mountEnv) corev1.Volume {
			return hostPathVolume(filepath.Join(e.data, "db"), corev1.HostPathFile)
		}, plant: func(t *testing.T, e *mountEnv, _ *corev1.Pod) {
			e.symlink(t, "../podsync/podsync.db", filepath.Join(e.data, "db"))
		}, want: []string{"what it resolves to is", "podsync's store"}},
		{name: "an ancestor of the denied paths through a link (inode check)", volume: func(e *mountEnv) corev1.Volume {
			return hostPathVolume(filepath.Join(e.data, "top"), corev1.HostPathDirectory)
		}, plant: func(t *testing.T, e *mountEnv, _ *corev1.Pod) { e.symlink(t, "..", filepath.Join(e.data, "top")) },
			want: []string{"what it resolves to contains"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newMountEnv(t)
			pod := enginetest.Pod()
			pod.Spec.Containers = pod.Spec.Containers[:1]
			pod.Spec.Volumes = []corev1.Volume{tc.volume(e)}
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "vol", MountPath: "/mnt", SubPath: tc.subPath}}
			if tc.plant != nil {
				tc.plant(t, e, pod)
			}
			dataBefore := tree(t, e.data)
			err := e.sync(pod)
			if !errors.Is(err, errdefs.ErrInvalidSpec) {
				t.Fatalf("pass error %v, want ErrInvalidSpec", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if m := mountsBelow(t, criconfig.PodDir(pod, e.h.Cfg)); len(m) != 0 {
				t.Errorf("mounted below the pod directory: %v", m)
			}
			if slices.Contains(e.h.Calls(), "CreateContainer") {
				t.Error("a container was created")
			}
			if got := tree(t, e.outside); !slices.Equal(got, e.outsideBefore) {
				t.Errorf("outside changed: %v, was %v", got, e.outsideBefore)
			}
			if got := tree(t, e.data); !slices.Equal(got, dataBefore) {
				t.Errorf("the allowed data directory changed: %v, was %v", got, dataBefore)
			}
		})
	}
}

// TestReadOnlyPrefixIsEnforced: a hostPath under a :ro prefix, asked
// read-write by the pod, directly or through a link from a read-write
// prefix, is given to the runtime read-only and mounted read-only, so a
// write through it fails with EROFS.
func TestReadOnlyPrefixIsEnforced(t *testing.T) {
	for _, tc := range []struct {
		name  string
		path  func(e *mountEnv) string
		plant func(t *testing.T, e *mountEnv)
	}{
		{"under the :ro prefix", func(e *mountEnv) string { return e.ro }, nil},
		{"through a link from the :rw prefix", func(e *mountEnv) string { return filepath.Join(e.data, "to-ro") },
			func(t *testing.T, e *mountEnv) { e.symlink(t, "../ro-area", filepath.Join(e.data, "to-ro")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newMountEnv(t)
			if tc.plant != nil {
				tc.plant(t, e)
			}
			pod := enginetest.Pod()
			pod.Spec.Containers = pod.Spec.Containers[:1]
			pod.Spec.Volumes = []corev1.Volume{hostPathVolume(tc.path(e), corev1.HostPathDirectory)}
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "vol", MountPath: "/mnt", ReadOnly: false}}
			if err := e.sync(pod); err != nil {
				t.Fatal(err)
			}
			target := syncer.MountTarget(pod, e.h.Cfg, "vol", "app", 0)
			m := e.rec.mounts("app")
			if len(m) != 1 || m[0].GetHostPath() != target || !m[0].GetReadonly() {
				t.Fatalf("mounts %v: want %s read-only", m, target)
			}
			if !sameFile(t, target, e.ro) {
				t.Errorf("%s does not show %s", target, e.ro)
			}
			err := os.WriteFile(filepath.Join(target, "file"), []byte("pwned"), 0o644)
			if !errors.Is(err, syscall.EROFS) {
				t.Errorf("write through the mount = %v, want EROFS", err)
			}
		})
	}
}

// TestMountsAreReusedAndUnmountedOnRemoval: passes, and a new Syncer (a
// restarted podsyncd), keep the bind mounts they made rather than stack
// new ones; RemovePod unmounts them before removing the pod directory, so
// the host's files under a hostPath survive the pod and nothing stays
// mounted.
func TestMountsAreReusedAndUnmountedOnRemoval(t *testing.T) {
	e := newMountEnv(t)
	keep := filepath.Join(e.data, "app", "keep")
	pod := enginetest.Pod()
	pod.Spec.Volumes = []corev1.Volume{
		hostPathVolume(filepath.Join(e.data, "app"), corev1.HostPathDirectoryOrCreate),
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "vol", MountPath: "/data"},
		{Name: "scratch", MountPath: "/s", SubPath: "a/b"},
		{Name: "vol", MountPath: "/keep", SubPath: "keep"},
	}
	if err := e.sync(pod); err != nil {
		t.Fatal(err)
	}
	podDir := criconfig.PodDir(pod, e.h.Cfg)
	first := mountsBelow(t, podDir)
	if len(first) != 3 {
		t.Fatalf("mounts below the pod directory: %v, want 3", first)
	}
	// The subPath "keep" was created as a directory; make it hold a file.
	if err := os.WriteFile(filepath.Join(keep, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	restarted, err := syncer.NewSyncer(syncer.SyncerOptions{Runtime: e.h.RT, Images: e.h.RT, Config: e.h.Cfg, HostPaths: e.policy})
	if err != nil {
		t.Fatal(err)
	}
	next := pod.DeepCopy()
	next.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "vol", MountPath: "/data", SubPath: "keep"}}
	for range 2 {
		if err := e.sync(next); err != nil {
			t.Fatal(err)
		}
		if _, err := restarted.SyncPod(e.h.Ctx, next, syncer.SyncInput{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := mountsBelow(t, podDir); len(got) != 4 {
		t.Errorf("after more passes: %v, want the 3 mounts and the new one, none stacked", got)
	}
	if err := restarted.RemovePod(e.h.Ctx, next); err != nil {
		t.Fatal(err)
	}
	if got := mountsBelow(t, podDir); len(got) != 0 {
		t.Errorf("still mounted after RemovePod: %v", got)
	}
	if _, err := os.Stat(podDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod directory not removed: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(keep, "f")); err != nil || string(b) != "data" {
		t.Errorf("the hostPath's file did not survive the pod: %q %v", b, err)
	}
}
