package syncer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsync/podsync/engine/criconfig"
)

// TestEnsurePodCgroup: a pod with pod-level resources gets the kubelet's
// pod cgroup values (ResourceConfigForPod) on cgroup v1 and v2 before its
// sandbox; a pod without them gets no pod cgroup of podsync's.
func TestEnsurePodCgroup(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "ns", "u-1"
	pod.Spec.Containers = []corev1.Container{{Name: "c"}}
	read := func(path string) string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(data))
	}
	t.Run("no pod-level resources", func(t *testing.T) {
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "memory"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := ensurePodCgroup(pod, criconfig.Options{CgroupFS: root}); err != nil {
			t.Fatal(err)
		}
		if entries, _ := os.ReadDir(filepath.Join(root, "memory")); len(entries) != 0 {
			t.Errorf("a pod cgroup was made: %v", entries)
		}
	})
	guaranteed := pod.DeepCopy()
	guaranteed.Spec.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	t.Run("cgroup v1", func(t *testing.T) {
		root := t.TempDir()
		for _, h := range []string{"cpu,cpuacct", "memory", "pids"} {
			if err := os.Mkdir(filepath.Join(root, h), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		opts := criconfig.Options{CgroupFS: root}
		if err := ensurePodCgroup(guaranteed, opts); err != nil {
			t.Fatal(err)
		}
		parent := criconfig.PodCgroupParent(guaranteed, opts)
		for file, want := range map[string]string{
			"cpu,cpuacct" + parent + "/cpu.shares":        "512",
			"cpu,cpuacct" + parent + "/cpu.cfs_quota_us":  "50000",
			"cpu,cpuacct" + parent + "/cpu.cfs_period_us": "100000",
			"memory" + parent + "/memory.limit_in_bytes":  "67108864",
		} {
			if got := read(filepath.Join(root, file)); got != want {
				t.Errorf("%s = %s, want %s", file, got, want)
			}
		}
	})
	t.Run("cgroup v2, burstable without a cpu limit", func(t *testing.T) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu memory"), 0o644); err != nil {
			t.Fatal(err)
		}
		burstable := pod.DeepCopy()
		burstable.Spec.Resources = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		}
		opts := criconfig.Options{CgroupFS: root}
		if err := ensurePodCgroup(burstable, opts); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, criconfig.PodCgroupParent(burstable, opts))
		if got := read(filepath.Join(dir, "memory.max")); got != "67108864" {
			t.Errorf("memory.max = %s", got)
		}
		if got := read(filepath.Join(dir, "cpu.weight")); got != "10" {
			t.Errorf("cpu.weight = %s, want runc's weight of 256 shares", got)
		}
		if _, err := os.Stat(filepath.Join(dir, "cpu.max")); err == nil {
			t.Error("cpu.max set without a cpu limit")
		}
		if got := read(filepath.Join(root, "cgroup.subtree_control")); got != "+cpu +memory" {
			t.Errorf("root subtree_control = %q", got)
		}
	})
}
