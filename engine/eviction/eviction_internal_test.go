package eviction

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// storagePod is the pod of the eviction tables: one container "main"
// with the given ephemeral-storage limit ("" for none) and volumes.
func storagePod(limit string, vols ...corev1.Volume) *corev1.Pod {
	c := corev1.Container{Name: "main"}
	if limit != "" {
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(limit)}
	}
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: vols}}
}

func emptyDir(name, medium, limit string) corev1.Volume {
	src := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMedium(medium)}
	if limit != "" {
		src.SizeLimit = ptr.To(resource.MustParse(limit))
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: src}}
}

func gib(n float64) int64 { return int64(n * (1 << 30)) }

// TestLocalStorageEviction ports the local storage cases of the
// kubelet's eviction_manager_test.go — TestStorageLimitEvictions (rootfs,
// logs and a local volume above their limits),
// TestManagerWithLocalStorageCapacityIsolationOpen (emptyDir, container
// and pod limits), TestContainerEphemeralStorageLimitEvictionForRestartableInitContainers
// and TestEmptyDirLimitEviction (a memory emptyDir is the kernel's to
// bound) — with the kubelet's messages, and the cases that stay.
func TestLocalStorageEviction(t *testing.T) {
	sidecar := func(limit string) *corev1.Pod {
		p := storagePod("")
		s := corev1.Container{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}
		s.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(limit)}
		p.Spec.InitContainers = []corev1.Container{s}
		return p
	}
	initPod := func(limit string) *corev1.Pod {
		p := storagePod("")
		c := corev1.Container{Name: "setup"}
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(limit)}
		p.Spec.InitContainers = []corev1.Container{c}
		return p
	}
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		usage       podStorageUsage
		wantSignal  string
		wantMessage string
	}{
		{name: "eviction due to rootfs above limit", pod: storagePod("1Gi"),
			usage:      podStorageUsage{Containers: map[string]int64{"main": gib(2)}, Total: gib(2)},
			wantSignal: SignalEphemeralPodFsLimit, wantMessage: "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. "},
		{name: "container above its limit, pod total within", pod: func() *corev1.Pod {
			p := storagePod("1Gi")
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "other", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("3Gi")}}})
			return p
		}(), usage: podStorageUsage{Containers: map[string]int64{"main": gib(2), "other": 0}, Total: gib(2)},
			wantSignal: SignalEphemeralContainerFsLimit, wantMessage: `Container main exceeded its local ephemeral storage limit "1Gi". `},
		{name: "eviction due to local volume above limit", pod: storagePod("", emptyDir("emptyDirVolume", "", "1Gi")),
			usage:      podStorageUsage{Volumes: map[string]int64{"emptyDirVolume": gib(2)}, Total: gib(2)},
			wantSignal: SignalEmptyDirFsLimit, wantMessage: `Usage of EmptyDir volume "emptyDirVolume" exceeds the limit "1Gi". `},
		{name: "empty-dir: twice its limit", pod: storagePod("", emptyDir("local-volume", "", "900Mi")),
			usage:      podStorageUsage{Volumes: map[string]int64{"local-volume": 1800 << 20}, Total: 1800 << 20},
			wantSignal: SignalEmptyDirFsLimit, wantMessage: `Usage of EmptyDir volume "local-volume" exceeds the limit "900Mi". `},
		{name: "emptyDir first, over the pod's limit too", pod: storagePod("1Gi", emptyDir("data", "", "1Gi")),
			usage:      podStorageUsage{Volumes: map[string]int64{"data": gib(3)}, Containers: map[string]int64{"main": gib(2)}, Total: gib(5)},
			wantSignal: SignalEmptyDirFsLimit, wantMessage: `Usage of EmptyDir volume "data" exceeds the limit "1Gi". `},
		{name: "emptyDir at its limit stays", pod: storagePod("", emptyDir("data", "", "1Gi")),
			usage: podStorageUsage{Volumes: map[string]int64{"data": gib(1)}, Total: gib(1)}},
		{name: "emptyDir without a limit stays", pod: storagePod("", emptyDir("data", "", "")),
			usage: podStorageUsage{Volumes: map[string]int64{"data": gib(100)}, Total: gib(100)}},
		{name: "Memory medium: the kernel bounds the tmpfs", pod: storagePod("", emptyDir("data", "Memory", "1Gi")),
			usage: podStorageUsage{Volumes: map[string]int64{"data": gib(2)}, Total: 0}},
		{name: "an unmeasured volume stays", pod: storagePod("", emptyDir("data", "", "1Gi")),
			usage: podStorageUsage{Volumes: map[string]int64{}}},
		{name: "pod-ephemeral-storage-limit: volumes count in the pod's total", pod: storagePod("800Mi", emptyDir("local-volume", "", "")),
			usage:      podStorageUsage{Volumes: map[string]int64{"local-volume": 1600 << 20}, Containers: map[string]int64{"main": 0}, Total: 1600 << 20},
			wantSignal: SignalEphemeralPodFsLimit, wantMessage: "Pod ephemeral local storage usage exceeds the total limit of containers 800Mi. "},
		{name: "restartable init container above its limit", pod: sidecar("10Mi"),
			usage:      podStorageUsage{Containers: map[string]int64{"sidecar": 100 << 20, "main": 0}, Total: 100 << 20},
			wantSignal: SignalEphemeralPodFsLimit, wantMessage: "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. "},
		{name: "restartable init container above its own limit only", pod: func() *corev1.Pod {
			p := sidecar("10Mi")
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
			return p
		}(), usage: podStorageUsage{Containers: map[string]int64{"sidecar": 50 << 20, "main": 0}, Total: 50 << 20},
			wantSignal: SignalEphemeralContainerFsLimit, wantMessage: `Container sidecar exceeded its local ephemeral storage limit "10Mi". `},
		{name: "within every limit", pod: storagePod("1Gi", emptyDir("data", "", "1Gi")),
			usage: podStorageUsage{Volumes: map[string]int64{"data": 1 << 20}, Containers: map[string]int64{"main": 1 << 20}, Total: 2 << 20}},
		{name: "no limit at all", pod: storagePod(""),
			usage: podStorageUsage{Containers: map[string]int64{"main": gib(100)}, Total: gib(100)}},
		{name: "a classic init container's limit is the pod's, not a container's", pod: func() *corev1.Pod {
			p := initPod("10Mi")
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
			return p
		}(), usage: podStorageUsage{Containers: map[string]int64{"setup": 50 << 20}, Total: 50 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signal, msg := localStorageEviction(tc.pod, tc.usage)
			if signal != tc.wantSignal || msg != tc.wantMessage {
				t.Errorf("localStorageEviction = %q, %q; want %q, %q", signal, msg, tc.wantSignal, tc.wantMessage)
			}
		})
	}
}

// TestStoreFsEviction: below its threshold the store's file system
// evicts the pod that uses the most there, with the kubelet's
// nodefs.available message; not above it, not when disabled, and not a
// pod that uses nothing.
func TestStoreFsEviction(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		p := &corev1.Pod{}
		p.Namespace, p.Name = "default", name
		return p
	}
	a, b, c := pod("a"), pod("b"), pod("c")
	critical := pod("critical")
	critical.Spec.Priority = ptr.To[int32](2000001000)
	// requesting asks for more than it uses.
	requesting := pod("requesting")
	requesting.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
	}}}
	pods := []storeFsCandidate{{pod: a, used: 10 << 20}, {pod: b, used: 300 << 20}, {pod: c, used: 0}}
	for _, tc := range []struct {
		name                string
		threshold           StorageThreshold
		available, capacity int64
		pods                []storeFsCandidate
		want                *corev1.Pod
		wantMessage         string
	}{
		{name: "below a percentage: the largest user", threshold: StorageThreshold{Percent: 10}, available: gib(0.5), capacity: gib(10), pods: pods,
			want: b, wantMessage: "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 512Mi. "},
		{name: "below bytes", threshold: StorageThreshold{Bytes: 1 << 30}, available: gib(0.5), capacity: gib(100), pods: pods, want: b,
			wantMessage: "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 512Mi. "},
		{name: "the larger of bytes and percent", threshold: StorageThreshold{Bytes: 1 << 20, Percent: 10}, available: gib(0.5), capacity: gib(10), pods: pods, want: b,
			wantMessage: "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 512Mi. "},
		{name: "above", threshold: StorageThreshold{Percent: 10}, available: gib(2), capacity: gib(10), pods: pods},
		{name: "at the threshold", threshold: StorageThreshold{Bytes: 1 << 30}, available: gib(1), capacity: gib(10), pods: pods},
		{name: "disabled", threshold: StorageThreshold{Disabled: true}, capacity: gib(10), pods: pods},
		{name: "nobody uses anything", threshold: StorageThreshold{Percent: 10}, capacity: gib(10), pods: []storeFsCandidate{{pod: c}}},
		{name: "ties by name", threshold: StorageThreshold{Percent: 10}, capacity: gib(10),
			pods: []storeFsCandidate{{pod: b, used: 5}, {pod: a, used: 5}}, want: a,
			wantMessage: "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 0. "},
		{name: "a critical pod after a lower priority one that uses less", threshold: StorageThreshold{Percent: 10}, capacity: gib(10),
			pods: []storeFsCandidate{{pod: critical, used: 300 << 20}, {pod: a, used: 10 << 20}}, want: a,
			wantMessage: "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 0. "},
		{name: "a pod over its request before a lower priority one within it", threshold: StorageThreshold{Percent: 10}, capacity: gib(10),
			pods: []storeFsCandidate{{pod: requesting, used: 10 << 20}, {pod: critical, used: 20 << 20}}, want: critical,
			wantMessage: "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 0. "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := storeFsEviction(tc.threshold, tc.available, tc.capacity, tc.pods)
			if got != tc.want || msg != tc.wantMessage {
				name := "<nil>"
				if got != nil {
					name = got.Name
				}
				t.Errorf("storeFsEviction = %s, %q; want %v, %q", name, msg, tc.want, tc.wantMessage)
			}
		})
	}
}

// TestDiskUsage: the walk counts the blocks of files and directories,
// a hard-linked file once, and neither follows a symbolic link out of
// the directory nor fails on a missing one.
func TestDiskUsage(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(outside, "big"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	base, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "big"), filepath.Join(dir, "filelink")); err != nil {
		t.Fatal(err)
	}
	if got, err := diskUsage(dir); err != nil || got-base > 8<<10 {
		t.Errorf("usage with links out = %d (%v), want about %d: links are not followed", got, err, base)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	one, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if one-base < 1<<20 || one-base > 1<<20+64<<10 {
		t.Errorf("usage with a 1 MiB file = %d over %d", one-base, base)
	}
	if err := os.Link(filepath.Join(dir, "sub", "f"), filepath.Join(dir, "hardlink")); err != nil {
		t.Fatal(err)
	}
	if got, err := diskUsage(dir); err != nil || got != one {
		t.Errorf("usage with a hard link = %d (%v), want %d: an inode counts once", got, err, one)
	}
	if got, err := diskUsage(filepath.Join(dir, "missing")); err != nil || got != 0 {
		t.Errorf("usage of a missing directory = %d, %v; want 0, nil", got, err)
	}
}
