package syncer_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// mountTypesBelow lists the mount table's entries at or below dir as
// "path fstype".
func mountTypesBelow(t *testing.T, dir string) []string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 {
			continue
		}
		if p := fields[4]; p == real || strings.HasPrefix(p, real+"/") {
			out = append(out, p+" "+fields[sep+1])
		}
	}
	return out
}

// tmpfsSize is the size of the file system at dir.
func tmpfsSize(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		t.Fatalf("%s is not a tmpfs (type %#x)", dir, st.Type)
	}
	return int64(st.Blocks) * st.Bsize
}

// TestMemoryVolumesAreTmpfs: a secret volume and an emptyDir of medium
// Memory are tmpfs mounts, sized as the kubelet sizes them (sizeLimit,
// else the pod's memory limit); passes and a new Syncer (a restart of
// podsyncd) reuse them rather than stack mounts; a secret written to disk
// by an older podsync is removed before the mount; RemovePod leaves no
// mount behind.
func TestMemoryVolumesAreTmpfs(t *testing.T) {
	requireRoot(t)
	h := syncertest.New(t)
	pod := enginetest.Pod()
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
	}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("8Mi"))}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
	}
	h.In.Secrets = []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: pod.Namespace},
		Data: map[string][]byte{"token": []byte("s3cr3t")}}}
	cache := criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "cache", h.Cfg)
	creds := criconfig.VolumeDir(pod, criconfig.VolumePluginSecret, "creds", h.Cfg)
	scratch := criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "scratch", h.Cfg)
	// What an older podsync left on disk.
	if err := os.MkdirAll(creds, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(creds, "old"), []byte("on disk"), 0o600); err != nil {
		t.Fatal(err)
	}

	res := h.Sync(pod)
	h.Converged(pod, res)
	want := []string{cache + " tmpfs", creds + " tmpfs"}
	check := func(when string) {
		t.Helper()
		if got := mountTypesBelow(t, criconfig.PodDir(pod, h.Cfg)); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: mounts below the pod directory:\n%s\nwant:\n%s", when, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	check("first pass")
	if got := tmpfsSize(t, cache); got != 8<<20 {
		t.Errorf("emptyDir tmpfs size %d, want sizeLimit %d", got, 8<<20)
	}
	// Two containers of 32Mi: the pod's memory limit.
	if got := tmpfsSize(t, creds); got != 64<<20 {
		t.Errorf("secret tmpfs size %d, want the pod's memory limit %d", got, 64<<20)
	}
	if data, err := os.ReadFile(filepath.Join(creds, "token")); err != nil || string(data) != "s3cr3t" {
		t.Errorf("secret file = %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(creds, "old")); !os.IsNotExist(err) {
		t.Errorf("a file of the secret directory from before the mount: %v, want gone", err)
	}

	// Passes that start a container set the volumes up again.
	restart := func(s *syncer.Syncer) {
		t.Helper()
		h.Exit(res, "app", 1)
		h.Clock.Step(10 * time.Minute) // past any back-off
		var err error
		if res, err = s.SyncPod(h.Ctx, pod, h.In, nil); err != nil {
			t.Fatal(err)
		}
		if got := syncertest.Newest(t, res, "app"); got.State != model.ContainerRunning {
			t.Fatalf("app is %v after the pass, want running", got.State)
		}
	}
	restart(h.S)
	check("second pass")
	restarted, err := syncer.NewSyncer(syncer.SyncerOptions{Runtime: h.RT, Images: h.RT, Clock: h.Clock, Config: h.Cfg})
	if err != nil {
		t.Fatal(err)
	}
	restart(restarted)
	check("pass of a new syncer")

	// The secret's directory on disk, beneath the tmpfs, holds nothing;
	// the next pass mounts the tmpfs again.
	if err := unix.Unmount(creds, 0); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(creds); err != nil || len(entries) != 0 {
		t.Errorf("secret directory beneath the tmpfs holds %v (%v), want nothing", entries, err)
	}
	restart(restarted)
	check("pass after the secret's tmpfs went")
	if data, err := os.ReadFile(filepath.Join(creds, "token")); err != nil || string(data) != "s3cr3t" {
		t.Errorf("secret file after the new mount = %q, %v", data, err)
	}

	if err := restarted.RemovePod(h.Ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := mountTypesBelow(t, criconfig.PodDir(pod, h.Cfg)); len(got) != 0 {
		t.Errorf("mounts left after RemovePod: %v", got)
	}
	for _, dir := range []string{cache, creds, scratch, criconfig.PodDir(pod, h.Cfg)} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s after RemovePod: %v, want gone", dir, err)
		}
	}
}

// TestMemoryEmptyDirOnDiskStaysUntilANewSandbox: a medium Memory emptyDir
// that an older podsync made a disk directory is shared by the pod's
// running containers, so a pass that restarts one of them keeps it (a
// tmpfs over it would split the volume); the pod's next sandbox, with no
// container running, gets the tmpfs, and the disk directory beneath it is
// emptied. A secret volume is mounted at once: its files never go to disk.
func TestMemoryEmptyDirOnDiskStaysUntilANewSandbox(t *testing.T) {
	requireRoot(t)
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory}}}}
	cache := criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "cache", h.Cfg)
	res := h.Sync(pod)
	h.Converged(pod, res)
	// What an older podsync left: the volume on disk, shared by the
	// running containers.
	if err := unix.Unmount(cache, 0); err != nil {
		t.Fatal(err)
	}
	fill := filepath.Join(cache, "shared")
	if err := os.WriteFile(fill, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.Exit(res, "app", 1)
	res = h.Sync(pod)
	if got := syncertest.Newest(t, res, "app"); got.State != model.ContainerRunning || got.RestartCount != 1 {
		t.Fatalf("app %v restart %d, want running again", got.State, got.RestartCount)
	}
	if got := mountTypesBelow(t, criconfig.PodDir(pod, h.Cfg)); len(got) != 0 {
		t.Errorf("mounts after restarting one container of a running pod: %v, want none", got)
	}
	if _, err := os.Stat(fill); err != nil {
		t.Errorf("the running containers' file: %v", err)
	}

	// A new sandbox: nothing runs, the tmpfs goes on, the disk beneath is
	// emptied.
	if err := h.RT.StopPodSandbox(h.Ctx, res.View.Sandboxes[0].ID); err != nil {
		t.Fatal(err)
	}
	h.Clock.Step(10 * time.Minute)
	res = h.Sync(pod)
	h.Converged(pod, res)
	if got := mountTypesBelow(t, criconfig.PodDir(pod, h.Cfg)); len(got) != 1 || got[0] != cache+" tmpfs" {
		t.Errorf("mounts after a new sandbox: %v, want the tmpfs at %s", got, cache)
	}
	if err := unix.Unmount(cache, 0); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(cache); err != nil || len(entries) != 0 {
		t.Errorf("the disk directory beneath the tmpfs holds %v (%v), want nothing", entries, err)
	}
}

// recordingMounter is a Mounter that mounts nothing: it records the
// tmpfs mounts asked for and which directories count as mounted.
type recordingMounter struct {
	mu        sync.Mutex
	mounted   map[string]string // dir → options
	mounts    []string          // "dir options", in order
	unmounted []string
}

func (m *recordingMounter) IsTmpfs(dir string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.mounted[dir]
	return ok, nil
}

func (m *recordingMounter) MountTmpfs(dir, options string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mounted[dir] = options
	m.mounts = append(m.mounts, dir+" "+options)
	return nil
}

func (m *recordingMounter) UnmountBelow(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := range m.mounted {
		if d == dir || strings.HasPrefix(d, dir+"/") {
			delete(m.mounted, d)
		}
	}
	m.unmounted = append(m.unmounted, dir)
	return nil
}

// TestMounterStandsInForTheKernel: with a Mounter of its own the syncer
// asks it for the tmpfs mounts of a pod's memory volumes, with the
// kernel's options, once, and for the unmounts before the pod's
// directory is removed, and mounts nothing itself: the files are written
// to the directories (a hollow node's, which needs no root).
func TestMounterStandsInForTheKernel(t *testing.T) {
	m := &recordingMounter{mounted: map[string]string{}}
	h := syncertest.New(t, func(o *syncer.SyncerOptions) { o.Mounter = m })
	pod := enginetest.Pod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("8Mi"))}}},
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
	}
	h.In.Secrets = []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: pod.Namespace},
		Data: map[string][]byte{"token": []byte("s3cr3t")}}}
	cache := criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "cache", h.Cfg)
	creds := criconfig.VolumeDir(pod, criconfig.VolumePluginSecret, "creds", h.Cfg)

	res := h.Sync(pod)
	h.Converged(pod, res)
	h.Exit(res, "app", 1)
	h.Clock.Step(10 * time.Minute) // past any back-off
	res = h.Sync(pod)
	if got := syncertest.Newest(t, res, "app"); got.State != model.ContainerRunning {
		t.Fatalf("app is %v after the second pass, want running", got.State)
	}
	want := []string{cache + " mode=1777,size=8388608", creds + " mode=755"}
	if diff := cmp.Diff(want, m.mounts); diff != "" {
		t.Errorf("tmpfs mounts asked for (-want +got):\n%s", diff)
	}
	if got := mountTypesBelow(t, h.Cfg.RootDir); len(got) != 0 {
		t.Errorf("mounts below the root directory: %v, want none", got)
	}
	if data, err := os.ReadFile(filepath.Join(creds, "token")); err != nil || string(data) != "s3cr3t" {
		t.Errorf("secret file = %q, %v", data, err)
	}
	if err := h.S.RemovePod(h.Ctx, pod); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{criconfig.PodDir(pod, h.Cfg)}, m.unmounted); diff != "" {
		t.Errorf("unmounts asked for (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(criconfig.PodDir(pod, h.Cfg)); !os.IsNotExist(err) {
		t.Errorf("pod directory after RemovePod: %v, want gone", err)
	}
}
