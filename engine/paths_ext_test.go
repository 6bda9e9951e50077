package engine_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/store"
)

// TestSubPathThroughPlantedSymlink: a container writes a symbolic link to
// a directory of the node into its emptyDir; a container started later
// with a subPath through that link fails with CreateContainerConfigError
// instead of having the node's directory mounted, and nothing is created
// outside the volume. The containers already running are not disturbed.
func TestSubPathThroughPlantedSymlink(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	nodeEtc := t.TempDir()
	if err := os.WriteFile(filepath.Join(nodeEtc, "passwd"), []byte("root:x:0:0"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := basePod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	h.converged(pod, h.sync(pod))

	// What the container "app" does: ln -s <node dir> /data/link.
	vol := engine.VolumeDir(pod, engine.VolumePluginEmptyDir, "data", h.cfg)
	if err := os.Symlink(nodeEtc, filepath.Join(vol, "link")); err != nil {
		t.Fatal(err)
	}

	next := pod.DeepCopy()
	for _, tc := range []struct{ name, subPath, subPathExpr string }{
		{"reader", "link", ""},
		{"writer", "link/newdir", ""},
		{"expr", "", "$(LINK)/passwd"},
	} {
		c := container(tc.name, runForever...)
		c.Env = []corev1.EnvVar{{Name: "LINK", Value: "link"}}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/mnt", SubPath: tc.subPath, SubPathExpr: tc.subPathExpr}}
		next.Spec.Containers = append(next.Spec.Containers, c)
	}
	h.calls()
	res := h.sync(next)
	for _, name := range []string{"reader", "writer", "expr"} {
		st := failedStep(t, res, engine.ActionStartContainer, name)
		if st.Reason != engine.ReasonCreateContainerConfigErr || !errors.Is(st.Err, engine.ErrInvalidSpec) {
			t.Errorf("%s: reason %s, err %v; want CreateContainerConfigError wrapping ErrInvalidSpec", name, st.Reason, st.Err)
		}
	}
	if n := slices.Index(h.calls(), "CreateContainer"); n >= 0 {
		t.Errorf("a container with a subPath through the link was created (call %d)", n)
	}
	if entries, _ := os.ReadDir(nodeEtc); len(entries) != 1 {
		t.Errorf("the node's directory changed: %v", entries)
	}
	for _, name := range []string{"app", "helper"} {
		if inst := res.View.FindContainer(name); inst == nil || inst.State != engine.ContainerRunning {
			t.Errorf("%s no longer runs: %+v", name, inst)
		}
	}

	// A subPath to a real directory of the volume is created in it and
	// mounted from there.
	fixed := pod.DeepCopy()
	c := container("reader", runForever...)
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/mnt", SubPath: "real/dir"}}
	fixed.Spec.Containers = append(fixed.Spec.Containers, c)
	res = h.sync(fixed)
	if inst := newest(t, res, "reader"); inst.State != engine.ContainerRunning {
		t.Errorf("reader: %+v", inst)
	}
	want := filepath.Join(vol, "real", "dir")
	if fi, err := os.Lstat(want); err != nil || !fi.IsDir() {
		t.Errorf("subPath directory not created in the volume: %v", err)
	}
	cfg, err := engine.ContainerConfig(engine.ContainerConfigInput{Pod: fixed, Container: &fixed.Spec.Containers[2],
		ResolveSubPath: engine.ResolveSubPath}, h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(cfg.GetMounts(), func(m *runtimeapi.Mount) bool { return m.GetHostPath() == want }) {
		t.Errorf("mounts %v: want host path %s", cfg.GetMounts(), want)
	}
}

// TestHostileNamesNeverReachTheFileSystem: a pod whose UID, name or
// container name could leave its directory is refused by Apply and by
// SyncPod before anything is stored or created, and RemovePod of such an
// identity (an orphan's, read from CRI labels) leaves the file system
// alone.
func TestHostileNamesNeverReachTheFileSystem(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	canary := filepath.Join(h.cfg.RootDir, "canary")
	if err := os.WriteFile(canary, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
	}{
		{"uid ..", func(p *corev1.Pod) { p.UID = ".." }},
		{"uid escaping", func(p *corev1.Pod) { p.UID = "../../../tmp/x" }},
		{"uid with NUL", func(p *corev1.Pod) { p.UID = "u\x00" }},
		{"name with slash", func(p *corev1.Pod) { p.Name = "../../etc" }},
		{"container name escaping", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "../../../../etc" }},
		{"volume name escaping", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "../../../x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}},
		{"secret item escaping", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "s", Items: []corev1.KeyToPath{{Key: "k", Path: "../../../../../x"}}}}}}
		}},
		{"configMap item absolute", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, Items: []corev1.KeyToPath{{Key: "k", Path: "/etc/x"}}}}}}
		}},
		{"hostPath relative", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "etc"}}}}
		}},
		{"subPath escaping", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "d", MountPath: "/d", SubPath: "../../etc"}}
		}},
		{"seccomp profile escaping", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{
				Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("../../etc/shadow")}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := basePod()
			tc.mutate(pod)
			if _, err := h.node.Apply(h.ctx, pod, nil, nil, nil); !errors.Is(err, engine.ErrInvalidSpec) {
				t.Errorf("Apply = %v, want ErrInvalidSpec", err)
			}
			if _, err := h.st.Get(pod.UID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the pod was stored: %v", err)
			}
			s, err := engine.NewSyncer(engine.SyncerOptions{Runtime: h.rt, Images: h.rt, Config: h.cfg})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.SyncPod(h.ctx, pod, engine.SyncInput{}, nil); !errors.Is(err, engine.ErrInvalidSpec) {
				t.Errorf("SyncPod = %v, want ErrInvalidSpec", err)
			}
			if err := s.RemovePod(h.ctx, pod); err != nil {
				t.Errorf("RemovePod: %v", err)
			}
		})
	}
	if sbs, _ := h.rt.ListPodSandbox(h.ctx, nil); len(sbs) != 0 {
		t.Errorf("%d sandboxes created", len(sbs))
	}
	if _, err := os.Stat(canary); err != nil {
		t.Errorf("the root directory was touched: %v", err)
	}
	if entries, _ := os.ReadDir(h.cfg.RootDir); len(entries) != 1 {
		t.Errorf("root directory holds %v, want only the canary", entries)
	}
}
