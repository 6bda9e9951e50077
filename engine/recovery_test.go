package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// TestLostStoreKeepsPodsRunning: a node whose store has no history (a
// missing or replaced file opens as a new store) on a runtime that holds
// podsync's pods refuses to start with ErrStoreLost, naming the store and
// the pods, and touches nothing; with RemoveOrphans it removes them.
func TestLostStoreKeepsPodsRunning(t *testing.T) {
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	h.apply(pod)
	before := h.view(pod)
	h.stop()

	run := func(removeOrphans bool) error {
		t.Helper()
		st, err := store.Open(filepath.Join(t.TempDir(), "podsync.db"), store.Options{Clock: h.clock})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = st.Close() }()
		opts := h.opts
		opts.Store, opts.RemoveOrphans, opts.Logger = st, removeOrphans, zaptest.NewLogger(t)
		n, err := engine.NewNode(opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx) }()
		if !removeOrphans {
			return <-done
		}
		h.eventually("the orphans removed", func() bool { return len(h.view(pod).Sandboxes) == 0 })
		cancel()
		return <-done
	}

	err := run(false)
	if !errors.Is(err, errdefs.ErrStoreLost) || !strings.Contains(err.Error(), "shop/web") || !strings.Contains(err.Error(), "--remove-orphans") {
		t.Fatalf("Run on a lost store = %v, want ErrStoreLost naming shop/web and the flag", err)
	}
	after := h.view(pod)
	if len(after.Sandboxes) != 1 || after.Sandboxes[0].ID != before.Sandboxes[0].ID || after.Sandboxes[0].State != plan.SandboxReady {
		t.Errorf("sandboxes after the refusal %v, want %s ready, untouched", after.Sandboxes, before.Sandboxes[0].ID)
	}
	for _, c := range after.Containers {
		if c.State != plan.ContainerRunning {
			t.Errorf("container %s %s after the refusal, want running", c.Name, c.State)
		}
	}
	if err := run(true); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Run with RemoveOrphans = %v", err)
	}
}

// TestOrphansKeptUnlessRemoveOrphans: a pod the runtime holds under
// podsync's labels that a store with history never held is kept running,
// at recovery and by the periodic sweep, and counted in
// podsync_orphaned_pods; what is left of a pod the node deleted itself is
// removed; with RemoveOrphans the orphan is removed too.
func TestOrphansKeptUnlessRemoveOrphans(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := engine.NewMetrics(reg, engine.MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := newNodeHarness(t, func(o *engine.NodeOptions) { o.Metrics = m; o.GC.Period = time.Minute })
	kept := enginetest.Pod()
	h.apply(kept)
	leftover := enginetest.Pod()
	leftover.Name, leftover.UID = "leftover", "uid-leftover"
	h.apply(leftover)
	h.stop()

	// Another store's pod, and a deletion this store recorded.
	orphan := enginetest.Pod()
	orphan.Name, orphan.UID = "orphan", "uid-orphan"
	s, err := syncer.NewSyncer(syncer.SyncerOptions{Runtime: h.rt, Images: h.rt, Clock: h.clock, Config: h.cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncPod(h.ctx, orphan, syncer.SyncInput{}, nil); err != nil {
		t.Fatal(err)
	}
	before := h.view(orphan)
	if _, err := h.st.Delete(leftover.UID); err != nil {
		t.Fatal(err)
	}

	h.start()
	h.eventually("the leftover removed", func() bool { return len(h.view(leftover).Sandboxes) == 0 })
	orphans := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == engine.MetricOrphanedPods {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	h.eventually(engine.MetricOrphanedPods+" 1 once the node runs", func() bool { return orphans() == 1 })
	// The periodic sweep keeps it too, while it removes what is left of
	// a pod the node deleted since.
	gone := enginetest.Pod()
	gone.Name, gone.UID = "gone", "uid-gone"
	h.apply(gone)
	if found, _, err := h.node.Delete(h.ctx, gone.Namespace, gone.Name, "", new(int64)); err != nil || !found {
		t.Fatalf("Delete = %t, %v", found, err)
	}
	if _, err := s.SyncPod(h.ctx, gone, syncer.SyncInput{}, nil); err != nil {
		t.Fatal(err)
	}
	h.eventually("the sweep removes what is left of a pod the node deleted", func() bool {
		h.clock.Step(time.Minute)
		return len(h.view(gone).Sandboxes) == 0
	})
	after := h.view(orphan)
	if len(after.Sandboxes) != 1 || after.Sandboxes[0].ID != before.Sandboxes[0].ID || after.Sandboxes[0].State != plan.SandboxReady {
		t.Errorf("orphan's sandboxes after sweeps %v, want %s kept ready", after.Sandboxes, before.Sandboxes[0].ID)
	}
	for _, c := range after.Containers {
		if c.State != plan.ContainerRunning {
			t.Errorf("orphan's container %s is %s, want running", c.Name, c.State)
		}
	}
	if got := orphans(); got != 1 {
		t.Errorf("%s = %v after sweeps, want 1", engine.MetricOrphanedPods, got)
	}
	if len(h.view(kept).Sandboxes) != 1 {
		t.Errorf("the stored pod's sandbox is gone")
	}

	h.stop()
	h.opts.RemoveOrphans = true
	h.start()
	h.eventually("the orphan removed with RemoveOrphans", func() bool { return len(h.view(orphan).Sandboxes) == 0 })
	h.eventually(engine.MetricOrphanedPods+" 0 after the removal", func() bool { return orphans() == 0 })
}
