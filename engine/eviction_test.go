package engine_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/metrics"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/store"
)

// evictionPeriod is the eviction period of the eviction tests.
const evictionPeriod = 10 * time.Second

// fill writes n bytes of data (not a sparse file) at path.
func fill(t *testing.T, path string, n int) {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// stepUntil steps the clock by the eviction period until cond holds,
// giving each period's check half a second to run (a step before the
// node's ticker exists is lost).
func (h *nodeHarness) stepUntil(what string, cond func() bool) {
	h.t.Helper()
	for {
		h.clock.Step(evictionPeriod)
		wait := time.After(500 * time.Millisecond)
		for !cond() {
			select {
			case <-h.ctx.Done():
				h.t.Fatalf("%s: not reached", what)
			case <-wait:
			case <-time.After(5 * time.Millisecond):
				continue
			}
			break
		}
		if cond() {
			return
		}
	}
}

// waitEvicted steps the clock by the eviction period until the pod's
// stored status is Failed, Evicted; it returns that status.
func (h *nodeHarness) waitEvicted(pod *corev1.Pod) corev1.PodStatus {
	h.t.Helper()
	var st corev1.PodStatus
	h.stepUntil("pod evicted", func() bool {
		st = h.storedStatus(pod)
		return st.Phase == corev1.PodFailed && st.Reason == engine.ReasonEvicted
	})
	return st
}

// waitStopped waits until no container of the pod runs.
func (h *nodeHarness) waitStopped(pod *corev1.Pod) {
	h.t.Helper()
	h.eventually("containers stopped", func() bool {
		v := h.view(pod)
		return len(v.Containers) > 0 && !slices.ContainsFunc(v.Containers, func(c model.ContainerInstance) bool {
			return c.State == model.ContainerRunning
		})
	})
}

// TestNodeEvictsOverLocalStorageLimits: the node measures its pods'
// local storage every period and evicts, as the kubelet's eviction
// manager, a pod whose disk-backed emptyDir exceeds its sizeLimit or whose
// container (writable layer and logs) exceeds its ephemeral-storage
// limit: phase Failed, reason Evicted, the kubelet's message and an
// Evicted event; its containers are stopped and, once nothing runs, its
// volumes torn down. The record stays.
func TestNodeEvictsOverLocalStorageLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		mutate  func(*corev1.Pod)
		exceed  func(h *nodeHarness, pod *corev1.Pod)
		message string
	}{
		{
			name: "emptyDir over its sizeLimit",
			mutate: func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					SizeLimit: ptr.To(resource.MustParse("1Mi"))}}}}
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			},
			exceed: func(h *nodeHarness, pod *corev1.Pod) {
				fill(h.t, filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "data", h.cfg), "blob"), 2<<20)
			},
			message: `Usage of EmptyDir volume "data" exceeds the limit "1Mi". `,
		},
		{
			name: "container writable layer over its ephemeral-storage limit",
			mutate: func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
				p.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Mi")}
			},
			exceed: func(h *nodeHarness, pod *corev1.Pod) {
				h.rt.SetWritableLayer(h.view(pod).FindContainer("helper").ID, 2<<20)
			},
			message: `Container helper exceeded its local ephemeral storage limit "1Mi". `,
		},
		{
			name: "container logs over its ephemeral-storage limit",
			mutate: func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
				p.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Mi")}
			},
			exceed: func(h *nodeHarness, pod *corev1.Pod) {
				fill(h.t, filepath.Join(criconfig.PodLogDirectory(pod, h.cfg), "helper", "0.log.20260301-120000"), 2<<20)
			},
			message: `Container helper exceeded its local ephemeral storage limit "1Mi". `,
		},
		{
			name: "pod over the sum of its containers' limits",
			mutate: func(p *corev1.Pod) {
				for i := range p.Spec.Containers {
					p.Spec.Containers[i].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("2Mi")}
				}
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			},
			exceed: func(h *nodeHarness, pod *corev1.Pod) {
				fill(h.t, filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "data", h.cfg), "blob"), 5<<20)
			},
			message: "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newNodeHarness(t, func(o *engine.NodeOptions) {
				o.Eviction = engine.EvictionPolicy{Period: evictionPeriod, StoreMinAvailable: engine.StorageThreshold{Disabled: true}}
			})
			pod := enginetest.Pod()
			tc.mutate(pod)
			h.apply(pod)
			// Within its limits the pod keeps running.
			h.stepUntil("a measurement", func() bool { return slices.Contains(h.rt.GetCalls(), "ListContainerStats") })
			// One call measured every container's writable layer.
			if slices.Contains(h.rt.GetCalls(), "ContainerStats") {
				t.Errorf("the round asked for a container's stats on its own: %v", h.rt.GetCalls())
			}
			if st := h.storedStatus(pod); st.Phase != corev1.PodRunning {
				t.Fatalf("phase %s within the limits, want Running", st.Phase)
			}

			tc.exceed(h, pod)
			st := h.waitEvicted(pod)
			if st.Message != tc.message {
				t.Errorf("message %q, want %q", st.Message, tc.message)
			}
			h.waitStopped(pod)
			if ev := h.events(pod); !slices.Contains(ev, engine.ReasonEvicted) {
				t.Errorf("events %v, want an Evicted event", ev)
			}
			h.eventually("volumes torn down", func() bool {
				_, err := os.Stat(filepath.Join(criconfig.PodDir(pod, h.cfg), "volumes"))
				return errors.Is(err, os.ErrNotExist)
			})
			// Nothing restarts, and the status keeps the eviction.
			h.clock.Step(10 * time.Minute)
			h.clock.Step(evictionPeriod)
			if st := h.storedStatus(pod); st.Phase != corev1.PodFailed || st.Reason != engine.ReasonEvicted || st.Message != tc.message {
				t.Errorf("status after a while: %s %s %q", st.Phase, st.Reason, st.Message)
			}
			if slices.ContainsFunc(h.view(pod).Containers, func(c model.ContainerInstance) bool { return c.State == model.ContainerRunning }) {
				t.Errorf("a container of the evicted pod runs again")
			}
		})
	}
}

// TestNodeDoesNotEvictUnmeasured: a pod whose measurement fails (the
// runtime does not answer ListContainerStats) is not evicted, however full its
// emptyDir; the next measurement that succeeds evicts it.
func TestNodeDoesNotEvictUnmeasured(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		o.Eviction = engine.EvictionPolicy{Period: evictionPeriod, StoreMinAvailable: engine.StorageThreshold{Disabled: true}}
	})
	pod := enginetest.Pod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		SizeLimit: ptr.To(resource.MustParse("1Mi"))}}}}
	h.apply(pod)
	fill(t, filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "data", h.cfg), "blob"), 2<<20)
	calls := func() int { return countCalls(h, "ListContainerStats") }
	for range 3 {
		h.rt.InjectError("ListContainerStats", errors.New("stats unavailable"))
	}
	for i := 1; i <= 3; i++ {
		h.stepUntil("a failed measurement", func() bool { return calls() >= i })
	}
	if st := h.storedStatus(pod); st.Phase != corev1.PodRunning {
		t.Fatalf("phase %s %s after failed measurements, want Running", st.Phase, st.Reason)
	}
	h.waitEvicted(pod)
	h.waitStopped(pod)
}

// TestNodeEvictsForTheStoreFs: when the store's file system has less
// free than StoreMinAvailable, the pod using the most local storage there
// is evicted first, with the kubelet's nodefs message, one per period.
func TestNodeEvictsForTheStoreFs(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		// More than any file system has free: the threshold is met.
		o.Eviction = engine.EvictionPolicy{Period: evictionPeriod, StoreMinAvailable: engine.StorageThreshold{Percent: 100}}
	})
	small, big := enginetest.Pod(), enginetest.Pod()
	big.Name, big.UID = "big", "uid-2"
	for _, p := range []*corev1.Pod{small, big} {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		h.apply(p)
	}
	if !sameFs(t, h.st.Path(), h.cfg.RootDir) {
		t.Fatalf("the test's store and root directory are on different file systems")
	}
	fill(t, filepath.Join(criconfig.VolumeDir(big, criconfig.VolumePluginEmptyDir, "data", h.cfg), "blob"), 1<<20)
	st := h.waitEvicted(big)
	if !strings.HasPrefix(st.Message, "The node was low on resource: ephemeral-storage. Threshold quantity: ") {
		t.Errorf("message %q, want the kubelet's nodefs message", st.Message)
	}
	h.waitStopped(big)
	// The pressure stays (the threshold is the whole file system): the
	// next largest goes in a later period, after the largest.
	h.waitEvicted(small)
	entries, err := h.st.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range entries {
		if e.Kind == store.KindEvent && e.Event.Reason == engine.ReasonEvicted {
			order = append(order, e.Pod.Name)
		}
	}
	if !slices.Equal(order, []string{"big", "web"}) {
		t.Errorf("evicted in the order %v, want [big web]", order)
	}
}

// sameFs reports whether a and b are on one file system.
func sameFs(t *testing.T, a, b string) bool {
	t.Helper()
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev
}

// TestMetricsLocalStorage: podsync_pod_ephemeral_storage_bytes shows each
// running pod's last measurement, and podsync_evictions_total counts
// evictions by signal, every signal exported from the start.
func TestMetricsLocalStorage(t *testing.T) {
	t.Parallel()
	reg, m := newMetrics(t, metrics.Options{ErrorCode: grpcCode})
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		o.Runtime, o.Images, o.Metrics = m.InstrumentRuntime(o.Runtime), m.InstrumentImages(o.Images), m
		o.Eviction = engine.EvictionPolicy{Period: evictionPeriod, StoreMinAvailable: engine.StorageThreshold{Disabled: true}}
	})
	for _, sig := range []string{engine.SignalEmptyDirFsLimit, engine.SignalEphemeralPodFsLimit,
		engine.SignalEphemeralContainerFsLimit, engine.SignalNodeFsAvailable} {
		if sample(t, reg, metrics.MetricEvictions, "signal", sig) == nil {
			t.Errorf("%s{signal=%q} not exported", metrics.MetricEvictions, sig)
		}
	}
	pod := enginetest.Pod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		SizeLimit: ptr.To(resource.MustParse("4Mi"))}}}}
	h.apply(pod)
	h.rt.SetWritableLayer(h.view(pod).FindContainer("app").ID, 1<<20)
	usage := func() float64 {
		return value(t, reg, metrics.MetricPodEphemeralUsage, "namespace", pod.Namespace, "pod", pod.Name)
	}
	// The writable layer, the hosts file's block.
	h.stepUntil("the pod's usage measured", func() bool { return usage() > 1<<20 })
	fill(t, filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "data", h.cfg), "blob"), 2<<20)
	h.stepUntil("the volume measured", func() bool { return usage() > 3<<20 })
	if got := value(t, reg, metrics.MetricEvictions, "signal", engine.SignalEmptyDirFsLimit); got != 0 {
		t.Errorf("evictions within the limit: %g", got)
	}
	fill(t, filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "data", h.cfg), "blob2"), 3<<20)
	h.waitEvicted(pod)
	// Counted once the status is stored.
	h.eventually("the eviction counted", func() bool {
		return value(t, reg, metrics.MetricEvictions, "signal", engine.SignalEmptyDirFsLimit) == 1
	})
	// An evicted pod is no longer measured.
	h.stepUntil("the evicted pod's usage gone", func() bool {
		return sample(t, reg, metrics.MetricPodEphemeralUsage, "namespace", pod.Namespace, "pod", pod.Name) == nil
	})
}

// TestStoreStaysWritableWhenAPodFillsItsFileSystem: the store and the
// pods' volumes share a small file system (a 32 MiB tmpfs) and a pod fills
// it to the last block. With an 8 MiB watermark and a 4 MiB reserve next
// to the store, the pod is still evicted (recording the eviction may use
// the reserve), its emptyDir is removed once it stopped, the store takes
// new pods again and the reserve is made again. Needs root (CI runs as
// root).
func TestStoreStaysWritableWhenAPodFillsItsFileSystem(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a tmpfs and must run as root (CI does)")
	}
	fsDir := t.TempDir()
	if err := unix.Mount("tmpfs", fsDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=32m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(fsDir, unix.MNT_DETACH); err != nil {
			t.Error(err)
		}
	})
	st, err := store.Open(filepath.Join(fsDir, "podsync.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	root := filepath.Join(fsDir, "root")
	reserve := filepath.Join(fsDir, "podsync.db.reserve")
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		o.Store = st
		o.Config.RootDir = root
		o.Eviction = engine.EvictionPolicy{Period: evictionPeriod, StoreMinAvailable: engine.StorageThreshold{Bytes: 8 << 20},
			StoreReserve: 4 << 20}
	})
	h.st, h.cfg.RootDir = st, root
	h.eventually("the reserve made at the start", func() bool {
		fi, err := os.Stat(reserve)
		return err == nil && fi.Size() == 4<<20
	})
	pod := enginetest.Pod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	h.apply(pod)
	// The pod writes until the file system is full.
	f, err := os.Create(filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "data", h.cfg), "blob"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err = f.Write(buf); err != nil {
			break
		}
	}
	_ = f.Close()
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("filling the file system: %v, want ENOSPC", err)
	}

	st2 := h.waitEvicted(pod)
	if !strings.Contains(st2.Message, "Threshold quantity: 8Mi, available: ") {
		t.Errorf("message %q, want the watermark's", st2.Message)
	}
	h.waitStopped(pod)
	h.eventually("the evicted pod's emptyDir removed", func() bool {
		_, err := os.Stat(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "data", h.cfg))
		return errors.Is(err, os.ErrNotExist)
	})
	// The store takes a new pod, and its record and status.
	other := enginetest.Pod()
	other.Name, other.UID = "other", "uid-2"
	h.apply(other)
	if st := h.storedStatus(other); st.Phase != corev1.PodRunning {
		t.Errorf("a pod applied after the eviction is %s, want Running", st.Phase)
	}
	h.stepUntil("the reserve in place again", func() bool {
		fi, err := os.Stat(reserve)
		return err == nil && fi.Size() == 4<<20
	})
	var sfs unix.Statfs_t
	if err := unix.Statfs(fsDir, &sfs); err != nil {
		t.Fatal(err)
	}
	if free := int64(sfs.Bavail) * sfs.Bsize; free < 8<<20 {
		t.Errorf("%d bytes free after the eviction, want the watermark's 8 MiB", free)
	}
}

// TestHousekeepingReadsNoPodViews: a housekeeping round measures every
// pod from one list of the running containers, not from each pod's view
// (two lists and a status per object, per pod, every round).
func TestHousekeepingReadsNoPodViews(t *testing.T) {
	t.Parallel()
	reg, m := newMetrics(t, metrics.Options{ErrorCode: grpcCode})
	spy := &listSpy{lists: map[types.UID]int{}}
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		spy.Runtime = o.Runtime
		o.Runtime, o.Metrics = spy, m
		o.Eviction = engine.EvictionPolicy{Period: evictionPeriod, StoreMinAvailable: engine.StorageThreshold{Disabled: true}}
	})
	var pods []*corev1.Pod
	for i := range 2 {
		pod := enginetest.Pod()
		pod.Name, pod.UID = fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("uid-web-%d", i))
		h.apply(pod)
		h.rt.SetWritableLayer(h.view(pod).FindContainer("app").ID, uint64(i+1)<<20)
		pods = append(pods, pod)
	}
	before := map[types.UID]int{}
	for _, p := range pods {
		before[p.UID] = spy.listsOf(p.UID)
	}
	h.stepUntil("both pods measured", func() bool {
		for i, p := range pods {
			if value(t, reg, metrics.MetricPodEphemeralUsage, "namespace", p.Namespace, "pod", p.Name) < float64(int64(i+1)<<20) {
				return false
			}
		}
		return true
	})
	for _, p := range pods {
		if got := spy.listsOf(p.UID); got != before[p.UID] {
			t.Errorf("pod %s: %d lists of its objects during housekeeping, want none", p.Name, got-before[p.UID])
		}
	}
}

// TestNodeEvictsTheClaimWriterFirst: what a pod writes to a named volume
// it mounts read-write counts for the store's file system ranking: the pod
// filling the disk through its claim is evicted first (its writes were not
// measured, and it went last, after an innocent pod); a pod mounting the
// same claim read-only does not count it.
func TestNodeEvictsTheClaimWriterFirst(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		o.Eviction = engine.EvictionPolicy{Period: evictionPeriod, StoreMinAvailable: engine.StorageThreshold{Percent: 100}}
	})
	innocent, writer, reader := enginetest.Pod(), claimPod("shop", "writer", "w", "data"), claimPod("shop", "reader", "r", "data")
	innocent.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	reader.Spec.Containers[0].VolumeMounts[0].ReadOnly = true
	for _, p := range []*corev1.Pod{innocent, writer, reader} {
		h.apply(p)
	}
	fill(t, filepath.Join(criconfig.VolumeDir(innocent, criconfig.VolumePluginEmptyDir, "scratch", h.cfg), "blob"), 1<<20)
	fill(t, filepath.Join(criconfig.ClaimVolumeDir("shop", "data", h.cfg), "blob"), 4<<20)
	h.waitEvicted(writer)
	h.waitEvicted(innocent)
	entries, err := h.st.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range entries {
		if e.Kind == store.KindEvent && e.Event.Reason == engine.ReasonEvicted {
			order = append(order, e.Pod.Name)
		}
	}
	if len(order) < 2 || order[0] != "writer" || order[1] != "web" {
		t.Errorf("evicted in the order %v, want the claim's writer first, then the innocent pod (the read-only reader uses nothing)", order)
	}
}
