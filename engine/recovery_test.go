package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/metrics"
	"github.com/podsync/podsync/engine/model"
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
	if !errors.Is(err, errdefs.ErrStoreLost) || !strings.Contains(err.Error(), "shop/web") ||
		!strings.Contains(err.Error(), "--remove-orphans") || !strings.Contains(err.Error(), "--adopt-runtime") {
		t.Fatalf("Run on a lost store = %v, want ErrStoreLost naming shop/web and the flags", err)
	}
	after := h.view(pod)
	if len(after.Sandboxes) != 1 || after.Sandboxes[0].ID != before.Sandboxes[0].ID || after.Sandboxes[0].State != model.SandboxReady {
		t.Errorf("sandboxes after the refusal %v, want %s ready, untouched", after.Sandboxes, before.Sandboxes[0].ID)
	}
	for _, c := range after.Containers {
		if c.State != model.ContainerRunning {
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
	m, err := metrics.New(reg, metrics.Options{})
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
			if mf.GetName() == metrics.MetricOrphanedPods {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	h.eventually(metrics.MetricOrphanedPods+" 1 once the node runs", func() bool { return orphans() == 1 })
	// The periodic sweep keeps it too, while it removes what is left of
	// a pod the node deleted since.
	gone := enginetest.Pod()
	gone.Name, gone.UID = "gone", "uid-gone"
	h.apply(gone)
	if res, err := h.node.Delete(h.ctx, gone.Namespace, gone.Name, "", new(int64)); err != nil || !res.Found {
		t.Fatalf("Delete = %t, %v", res.Found, err)
	}
	if _, err := s.SyncPod(h.ctx, gone, syncer.SyncInput{}, nil); err != nil {
		t.Fatal(err)
	}
	h.eventually("the sweep removes what is left of a pod the node deleted", func() bool {
		h.clock.Step(time.Minute)
		return len(h.view(gone).Sandboxes) == 0
	})
	// A pod that appears in the runtime after the start without the store
	// holding it (a creation still in flight when its pod was deleted,
	// here by the podsyncd before this one, which recorded nothing) is a
	// leftover, not an orphan: the sweep removes it.
	late := enginetest.Pod()
	late.Name, late.UID = "late", "uid-late"
	if _, err := s.SyncPod(h.ctx, late, syncer.SyncInput{}, nil); err != nil {
		t.Fatal(err)
	}
	h.eventually("the sweep removes a leftover that appeared after the start", func() bool {
		h.clock.Step(time.Minute)
		return len(h.view(late).Sandboxes) == 0
	})
	after := h.view(orphan)
	if len(after.Sandboxes) != 1 || after.Sandboxes[0].ID != before.Sandboxes[0].ID || after.Sandboxes[0].State != model.SandboxReady {
		t.Errorf("orphan's sandboxes after sweeps %v, want %s kept ready", after.Sandboxes, before.Sandboxes[0].ID)
	}
	for _, c := range after.Containers {
		if c.State != model.ContainerRunning {
			t.Errorf("orphan's container %s is %s, want running", c.Name, c.State)
		}
	}
	if got := orphans(); got != 1 {
		t.Errorf("%s = %v after sweeps, want 1", metrics.MetricOrphanedPods, got)
	}
	if len(h.view(kept).Sandboxes) != 1 {
		t.Errorf("the stored pod's sandbox is gone")
	}

	h.stop()
	h.opts.RemoveOrphans = true
	h.start()
	h.eventually("the orphan removed with RemoveOrphans", func() bool { return len(h.view(orphan).Sandboxes) == 0 })
	h.eventually(metrics.MetricOrphanedPods+" 0 after the removal", func() bool { return orphans() == 0 })
}

// newStoreNode runs a Node of h's options on a fresh, empty store (the
// store file was lost; the node key beside it was kept) with mutate
// applied, until the test ends; Run's error is sent on the returned
// channel.
func newStoreNode(t *testing.T, h *nodeHarness, mutate func(*engine.NodeOptions)) (*engine.Node, *store.Store, <-chan error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "podsync.db")
	if err := os.WriteFile(store.NodeKeyFile(path), h.st.NodeKey(), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(path, store.Options{Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	opts := h.opts
	opts.Store, opts.Logger = st, zaptest.NewLogger(t)
	mutate(&opts)
	n, err := engine.NewNode(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	})
	return n, st, done
}

// TestAdoptRuntime: with AdoptRuntime, a node on a lost store rebuilds the
// record of every podsync pod the runtime holds, from the sandbox's
// record of the pod's spec, and takes them back under management with the
// same sandbox and containers (nothing restarted, restart counts kept); an
// Apply of the same pod then changes nothing in the runtime.
func TestAdoptRuntime(t *testing.T) {
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	pod.Labels = map[string]string{"app": "web"}
	pod.Annotations = map[string]string{"owner": "team-a"}
	h.apply(pod)
	other := enginetest.Pod()
	other.Name, other.UID = "api", "uid-api"
	h.apply(other)
	before := map[string]*model.RuntimeView{"web": h.view(pod), "api": h.view(other)}
	h.stop()

	n, st, _ := newStoreNode(t, h, func(o *engine.NodeOptions) { o.AdoptRuntime = true })
	for _, p := range []*corev1.Pod{pod, other} {
		h.eventually(p.Name+" adopted and Running", func() bool {
			rec, err := st.Get(p.UID)
			return err == nil && rec.Pod.Status.Phase == corev1.PodRunning
		})
		rec, err := n.Get(h.ctx, p.Namespace, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(p.Spec, rec.Pod.Spec); diff != "" {
			t.Errorf("%s: adopted spec (-applied +adopted):\n%s", p.Name, diff)
		}
		if diff := cmp.Diff(p.Labels, rec.Pod.Labels); diff != "" || rec.Pod.Annotations["owner"] != p.Annotations["owner"] {
			t.Errorf("%s: labels %v annotations %v, want the applied ones", p.Name, rec.Pod.Labels, rec.Pod.Annotations)
		}
		if _, partial := rec.Pod.Annotations[model.AnnotationAdopted]; partial {
			t.Errorf("%s: marked as adopted in part", p.Name)
		}
		sameRuntime(t, before[p.Name], h.view(p))
	}
	writes := h.writes()
	res, err := n.Apply(h.ctx, pod, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 0 || h.writes() != writes {
		t.Errorf("Apply of the same pod after the adoption did %v (%d CRI writes)", res.Steps, h.writes()-writes)
	}
	sameRuntime(t, before["web"], h.view(pod))
}

// sameRuntime fails unless after holds before's one sandbox, still ready,
// and its containers, still running with their restart counts.
func sameRuntime(t *testing.T, before, after *model.RuntimeView) {
	t.Helper()
	if len(after.Sandboxes) != 1 || after.Sandboxes[0].ID != before.Sandboxes[0].ID || after.Sandboxes[0].State != model.SandboxReady {
		t.Errorf("sandboxes %v, want only %s, ready", after.Sandboxes, before.Sandboxes[0].ID)
	}
	if len(after.Containers) != len(before.Containers) {
		t.Errorf("%d containers, want %d", len(after.Containers), len(before.Containers))
	}
	for _, c := range before.Containers {
		got := after.FindContainer(c.Name)
		if got == nil || got.ID != c.ID || got.State != model.ContainerRunning || got.RestartCount != c.RestartCount {
			t.Errorf("container %s: %+v, want %s running with %d restarts", c.Name, got, c.ID, c.RestartCount)
		}
	}
}

// noSpecRuntime creates sandboxes without the pod-spec annotation, as
// podsync did before it recorded it.
type noSpecRuntime struct{ syncer.Runtime }

func (r noSpecRuntime) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	delete(cfg.Annotations, model.AnnotationPodSpec)
	return r.Runtime.RunPodSandbox(ctx, cfg, handler)
}

// TestAdoptRuntimeInPart: a pod whose sandbox does not record its spec is
// adopted from its containers' annotations: nothing is restarted, and
// the record, a Warning event and the log say what was lost; a later
// Apply of the pod replaces the rebuilt spec and the mark.
func TestAdoptRuntimeInPart(t *testing.T) {
	h := newNodeHarness(t)
	h.stop()
	pod := enginetest.Pod()
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: 3600}
	s, err := syncer.NewSyncer(syncer.SyncerOptions{Runtime: noSpecRuntime{h.rt}, Images: h.rt, Clock: h.clock, Config: h.cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncPod(h.ctx, pod, syncer.SyncInput{}, nil); err != nil {
		t.Fatal(err)
	}
	before := h.view(pod)

	n, st, _ := newStoreNode(t, h, func(o *engine.NodeOptions) { o.AdoptRuntime = true })
	h.eventually("adopted and Running", func() bool {
		rec, err := st.Get(pod.UID)
		return err == nil && rec.Pod.Status.Phase == corev1.PodRunning
	})
	rec, err := st.Get(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if mark := rec.Pod.Annotations[model.AnnotationAdopted]; !strings.Contains(mark, "probes") {
		t.Errorf("%s = %q, want it to name the lost probes", model.AnnotationAdopted, mark)
	}
	entries, err := st.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	var warned bool
	for _, e := range entries {
		if e.Kind == store.KindEvent && e.Event.Reason == engine.EventReasonAdopted {
			warned = e.Event.Type == corev1.EventTypeWarning && strings.Contains(e.Event.Message, "probes")
		}
	}
	if !warned {
		t.Errorf("no Warning event %s naming what was lost", engine.EventReasonAdopted)
	}
	sameRuntime(t, before, h.view(pod))

	// The restored readiness probe runs (ExecSync); nothing else may.
	changes := func() int { return h.writes() - countCalls(h, "ExecSync") }
	writes := changes()
	if _, err := n.Apply(h.ctx, pod, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	rec, err = st.Get(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if _, marked := rec.Pod.Annotations[model.AnnotationAdopted]; marked || rec.Pod.Spec.Containers[0].ReadinessProbe == nil {
		t.Errorf("after the Apply: annotations %v, probe %v, want the applied spec", rec.Pod.Annotations, rec.Pod.Spec.Containers[0].ReadinessProbe)
	}
	if changes() != writes {
		t.Errorf("the Apply restoring the spec made %d CRI writes, want none", changes()-writes)
	}
	sameRuntime(t, before, h.view(pod))
}
