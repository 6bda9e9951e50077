package syncer_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// TestSubPathThroughPlantedSymlink: a container writes a symbolic link to
// a directory of the node into its emptyDir; a container started later
// with a subPath through that link fails with CreateContainerConfigError
// instead of having the node's directory mounted, and nothing is created
// outside the volume. The containers already running are not disturbed.
func TestSubPathThroughPlantedSymlink(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	rec := &recordingRuntime{}
	h := syncertest.New(t, rec.wrap)
	nodeEtc := t.TempDir()
	if err := os.WriteFile(filepath.Join(nodeEtc, "passwd"), []byte("root:x:0:0"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := enginetest.Pod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	h.Converged(pod, h.Sync(pod))

	// What the container "app" does: ln -s <node dir> /data/link.
	vol := criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "data", h.Cfg)
	if err := os.Symlink(nodeEtc, filepath.Join(vol, "link")); err != nil {
		t.Fatal(err)
	}

	next := pod.DeepCopy()
	for _, tc := range []struct{ name, subPath, subPathExpr string }{
		{"reader", "link", ""},
		{"writer", "link/newdir", ""},
		{"expr", "", "$(LINK)/passwd"},
	} {
		c := enginetest.Container(tc.name, enginetest.RunForever...)
		c.Env = []corev1.EnvVar{{Name: "LINK", Value: "link"}}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/mnt", SubPath: tc.subPath, SubPathExpr: tc.subPathExpr}}
		next.Spec.Containers = append(next.Spec.Containers, c)
	}
	h.Calls()
	res := h.Sync(next)
	for _, name := range []string{"reader", "writer", "expr"} {
		st := syncertest.FailedStep(t, res, syncer.ActionStartContainer, name)
		if st.Reason != syncer.ReasonCreateContainerConfigErr || !errors.Is(st.Err, errdefs.ErrInvalidSpec) {
			t.Errorf("%s: reason %s, err %v; want CreateContainerConfigError wrapping ErrInvalidSpec", name, st.Reason, st.Err)
		}
	}
	if n := slices.Index(h.Calls(), "CreateContainer"); n >= 0 {
		t.Errorf("a container with a subPath through the link was created (call %d)", n)
	}
	if entries, _ := os.ReadDir(nodeEtc); len(entries) != 1 {
		t.Errorf("the node's directory changed: %v", entries)
	}
	for _, name := range []string{"app", "helper"} {
		if inst := res.View.FindContainer(name); inst == nil || inst.State != model.ContainerRunning {
			t.Errorf("%s no longer runs: %+v", name, inst)
		}
	}

	// A subPath to a real directory of the volume is created in it and
	// mounted from there.
	fixed := pod.DeepCopy()
	c := enginetest.Container("reader", enginetest.RunForever...)
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/mnt", SubPath: "real/dir"}}
	fixed.Spec.Containers = append(fixed.Spec.Containers, c)
	res = h.Sync(fixed)
	if inst := syncertest.Newest(t, res, "reader"); inst.State != model.ContainerRunning {
		t.Errorf("reader: %+v", inst)
	}
	want := filepath.Join(vol, "real", "dir")
	if fi, err := os.Lstat(want); err != nil || !fi.IsDir() {
		t.Errorf("subPath directory not created in the volume: %v", err)
	}
	// The runtime is given the bind mount of what was checked, below
	// the pod directory, not a path it would resolve again.
	target := syncer.MountTarget(fixed, h.Cfg, "data", "reader", 0)
	if !sameFile(t, target, want) {
		t.Errorf("%s does not show the subPath directory %s", target, want)
	}
	if m := rec.mounts("reader"); len(m) != 1 || m[0].GetHostPath() != target {
		t.Errorf("mounts %v: want host path %s", m, target)
	}
}
