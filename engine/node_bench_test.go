package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/host/mounttable"
)

// BenchmarkNodeApplyNewPod is the node's own cost of starting a pod: an
// Apply of a new single-container pod on the fake runtime, through its
// one pass (the pod is deleted untimed after each). cri-calls/op counts
// the pass's calls to the runtime and image service (the raw floor makes
// 3: RunPodSandbox, CreateContainer, StartContainer).
func BenchmarkNodeApplyNewPod(b *testing.B) {
	rt, _, node, ctx := newBenchNode(b, true)
	calls := func() int {
		rt.Lock()
		n := len(rt.Called)
		rt.Called = nil
		rt.Unlock()
		rt.Images.Lock()
		n += len(rt.Images.Called)
		rt.Images.Called = nil
		rt.Images.Unlock()
		return n
	}
	total := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		pod := enginetest.Pod()
		pod.Spec.Containers = pod.Spec.Containers[:1]
		pod.Name, pod.UID = fmt.Sprintf("bench-%d", i), types.UID(fmt.Sprintf("uid-bench-%d", i))
		calls()
		b.StartTimer()
		if _, err := node.Apply(ctx, pod, nil, nil, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		total += calls()
		if _, err := node.Delete(ctx, pod.Namespace, pod.Name, "", ptr.To[int64](0)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(total)/float64(b.N), "cri-calls/op")
}

// BenchmarkNodeRunPods30 is a RunPods of 30 new single-container pods on
// the fake runtime with the store on disk (b.TempDir) as podsyncd's is:
// commits/pod and syncs/pod are the store's bbolt commits and
// fdatasyncs per pod (a pod's spec, then its status after its pass).
func BenchmarkNodeRunPods30(b *testing.B) {
	const n = 30
	_, st, node, ctx := newBenchNode(b, false)
	var commits, syncs int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		pods := make([]*corev1.Pod, n)
		for j := range pods {
			pod := enginetest.Pod()
			pod.Spec.Containers = pod.Spec.Containers[:1]
			pod.Name, pod.UID = fmt.Sprintf("bench-%d-%d", i, j), types.UID(fmt.Sprintf("uid-bench-%d-%d", i, j))
			pods[j] = pod
		}
		before := st.Stats()
		b.StartTimer()
		sum, err := node.RunPods(ctx, engine.RunPodsRequest{Pods: pods, WaitFor: engine.WaitForRunning}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		after := st.Stats()
		commits += after.Commits - before.Commits
		syncs += after.Syncs - before.Syncs
		for _, r := range sum.Results {
			if r.Outcome != engine.ReachedTarget {
				b.Fatalf("pod %s: %s %s", r.Pod, r.Outcome, r.Message)
			}
		}
		for _, pod := range pods {
			if _, err := node.Delete(ctx, pod.Namespace, pod.Name, "", ptr.To[int64](0)); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(commits)/float64(b.N*n), "commits/pod")
	b.ReportMetric(float64(syncs)/float64(b.N*n), "syncs/pod")
}

// newBenchNode runs a Node on the fake runtime with its store in a
// temporary directory, in /dev/shm when shm is set and there is one (the
// store's fdatasyncs on a disk would be most of the time of a pass).
func newBenchNode(b *testing.B, shm bool) (*enginetest.FakeRuntime, *store.Store, *engine.Node, context.Context) {
	b.Helper()
	dir := b.TempDir()
	if fi, err := os.Stat("/dev/shm"); shm && err == nil && fi.IsDir() {
		if dir, err = os.MkdirTemp("/dev/shm", "podsync-bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	rt := enginetest.NewRuntime(enginetest.WithImages(enginetest.Image))
	st, err := store.Open(filepath.Join(dir, "podsync.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	cfg := criconfig.Options{RootDir: filepath.Join(dir, "root"), PodLogDir: filepath.Join(dir, "logs"),
		CgroupFS: filepath.Join(dir, "cgroup"), NodeIPs: []string{"192.0.2.10"}}
	b.Cleanup(func() { _ = mounttable.UnmountBelow(cfg.RootDir) })
	node, err := engine.NewNode(engine.NodeOptions{Runtime: rt, Images: rt, Store: st, Config: cfg,
		RelistPeriod: time.Hour, EventedRelistPeriod: time.Hour,
		LogRotation: engine.LogRotation{Period: time.Hour}, GC: engine.GCPolicy{Period: time.Hour},
		Eviction: engine.EvictionPolicy{Period: time.Hour, StoreReserve: -1}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	})
	return rt, st, node, ctx
}
