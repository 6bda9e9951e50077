package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/metrics"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
	"github.com/podsync/podsync/host/mounttable"
)

// gatedRuntime is a FakeRuntime whose StartContainer waits while gate is
// closed (a nil gate never waits).
type gatedRuntime struct {
	*enginetest.FakeRuntime
	mu       sync.Mutex
	gate     chan struct{}
	pullGate bool
	pulling  atomic.Bool
}

func (g *gatedRuntime) StartContainer(ctx context.Context, id string) error {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.FakeRuntime.StartContainer(ctx, id)
}

// PullImage waits until ctx ends when pullGate is set.
func (g *gatedRuntime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, cfg *runtimeapi.PodSandboxConfig) (string, error) {
	g.mu.Lock()
	gate := g.pullGate
	g.mu.Unlock()
	if gate {
		g.pulling.Store(true)
		<-ctx.Done()
		return "", ctx.Err()
	}
	return g.FakeRuntime.PullImage(ctx, image, auth, cfg)
}

// nodeHarness is a Node on a FakeRuntime (behind gatedRuntime) with a
// fake clock and its own store.
type nodeHarness struct {
	t     *testing.T
	ctx   context.Context
	rt    *gatedRuntime
	clock *clocktesting.FakeClock
	st    *store.Store
	cfg   criconfig.Options
	opts  engine.NodeOptions
	node  *engine.Node
	stop  func()
}

func newNodeHarness(t *testing.T, mutate ...func(*engine.NodeOptions)) *nodeHarness {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	clk := clocktesting.NewFakeClock(syncertest.T0)
	rt := &gatedRuntime{FakeRuntime: enginetest.NewRuntime(enginetest.WithClock(clk), enginetest.WithImages(enginetest.Image))}
	st, err := store.Open(filepath.Join(t.TempDir(), "podsync.db"), store.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cfg := criconfig.Options{RootDir: t.TempDir(), PodLogDir: t.TempDir(), CgroupFS: t.TempDir(), NodeIPs: []string{"192.0.2.10"}}
	t.Cleanup(func() {
		if err := mounttable.UnmountBelow(cfg.RootDir); err != nil {
			t.Error(err)
		}
	})
	opts := engine.NodeOptions{Runtime: rt, Images: rt, Store: st, Clock: clk, Logger: zaptest.NewLogger(t), Config: cfg,
		// Relists and rotation only when the test steps the clock far.
		RelistPeriod: time.Hour, EventedRelistPeriod: time.Hour,
		LogRotation: engine.LogRotation{Period: time.Hour}, GC: engine.GCPolicy{Period: time.Hour},
		Eviction: engine.EvictionPolicy{Period: time.Hour, StoreReserve: -1}}
	for _, m := range mutate {
		m(&opts)
	}
	h := &nodeHarness{t: t, ctx: ctx, rt: rt, clock: clk, st: st, cfg: cfg, opts: opts}
	h.start()
	return h
}

// start builds a Node on the harness's runtime and store and runs it
// until the test ends or restart is called.
func (h *nodeHarness) start() {
	h.t.Helper()
	n, err := engine.NewNode(h.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	h.node = n
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("Run: %v", err)
			}
		})
	}
	h.t.Cleanup(h.stop)
}

func (h *nodeHarness) apply(pod *corev1.Pod) engine.ApplyResult {
	h.t.Helper()
	res, err := h.node.Apply(h.ctx, pod, nil, nil, nil)
	if err != nil {
		h.t.Fatalf("Apply: %v", err)
	}
	return res
}

// view reads the runtime's view of pod.
func (h *nodeHarness) view(pod *corev1.Pod) *model.RuntimeView {
	h.t.Helper()
	v, err := syncer.ReadView(h.ctx, h.rt, pod.UID)
	if err != nil {
		h.t.Fatal(err)
	}
	return &v
}

// eventually polls cond until it holds, failing the test at the deadline.
func (h *nodeHarness) eventually(what string, cond func() bool) {
	h.t.Helper()
	for !cond() {
		select {
		case <-h.ctx.Done():
			h.t.Fatalf("%s: not reached", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// storedStatus is the pod's status as the store holds it.
func (h *nodeHarness) storedStatus(pod *corev1.Pod) corev1.PodStatus {
	h.t.Helper()
	rec, err := h.st.Get(pod.UID)
	if err != nil {
		h.t.Fatal(err)
	}
	return rec.Pod.Status
}

// events lists the reasons of the pod's events in the revision log.
func (h *nodeHarness) events(pod *corev1.Pod) []string {
	h.t.Helper()
	entries, err := h.st.Since(0)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Kind == store.KindEvent && e.Pod.UID == pod.UID {
			out = append(out, e.Event.Reason)
		}
	}
	return out
}

var criWrites = []string{"RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "CreateContainer", "StartContainer",
	"StopContainer", "RemoveContainer", "PullImage", "ReopenContainerLog", "ExecSync"}

// writes counts the CRI calls that change the runtime.
func (h *nodeHarness) writes() int {
	n := 0
	for _, c := range h.rt.GetCalls() {
		if slices.Contains(criWrites, c) {
			n++
		}
	}
	return n
}

func TestNodeApplyStoresAndConverges(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	var emitted []string
	res, err := h.node.Apply(h.ctx, pod, nil, nil, func(s syncer.StepResult) { emitted = append(emitted, string(s.Action)) })
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.Status.Phase != corev1.PodRunning || len(emitted) != len(res.Steps) || len(res.Steps) == 0 {
		t.Fatalf("Apply = created %v, phase %s, %d steps, %d emitted", res.Created, res.Status.Phase, len(res.Steps), len(emitted))
	}
	if got := h.storedStatus(pod); got.Phase != corev1.PodRunning {
		t.Errorf("stored phase = %s", got.Phase)
	}
	rec, err := h.node.Get(h.ctx, pod.Namespace, pod.Name)
	if err != nil || rec.Pod.UID != pod.UID || rec.ModRevision == 0 {
		t.Fatalf("Get = %+v, %v", rec, err)
	}
	if got := h.events(pod); !slices.Contains(got, engine.EventStarted) || !slices.Contains(got, engine.EventCreated) {
		t.Errorf("events = %v", got)
	}
	again := h.apply(pod)
	if again.Created {
		t.Error("second Apply says created")
	}

	other := enginetest.Pod()
	other.UID = "uid-other"
	if _, err := h.node.Apply(h.ctx, other, nil, nil, nil); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("Apply of another uid = %v, want ErrAlreadyExists", err)
	}
	recs, rev, err := h.node.List(h.ctx, store.Filter{})
	if err != nil || len(recs) != 1 || rev == 0 {
		t.Fatalf("List = %d, %d, %v", len(recs), rev, err)
	}
}

func TestNodeAdmitSeam(t *testing.T) {
	t.Parallel()
	var asked []string
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		o.Admit = func(pod *corev1.Pod, others []*corev1.Pod) error {
			asked = append(asked, pod.Name)
			if pod.Name == "refused" {
				return errdefs.ErrAdmission
			}
			return nil
		}
	})
	pod := enginetest.Pod()
	h.apply(pod)
	h.apply(pod)
	refused := enginetest.Pod()
	refused.Name, refused.UID = "refused", "uid-refused"
	if _, err := h.node.Apply(h.ctx, refused, nil, nil, nil); !errors.Is(err, errdefs.ErrAdmission) {
		t.Fatalf("Apply = %v, want ErrAdmission", err)
	}
	if _, err := h.st.Get(refused.UID); !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("refused pod stored: %v", err)
	}
	if want := []string{"web", "refused"}; !slices.Equal(asked, want) {
		t.Errorf("admit asked about %v, want %v", asked, want)
	}
}

// TestNodeApplyWaitsForItsTurn: a second Apply of a pod whose pass runs
// waits for it, and gives up at its own deadline with the context's error,
// not ErrConflict.
func TestNodeApplyWaitsForItsTurn(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	gate := make(chan struct{})
	h.rt.mu.Lock()
	h.rt.gate = gate
	h.rt.mu.Unlock()
	pod := enginetest.Pod()
	first := make(chan error, 1)
	go func() {
		_, err := h.node.Apply(h.ctx, pod, nil, nil, nil)
		first <- err
	}()
	h.eventually("first pass blocked in StartContainer", func() bool {
		return slices.Contains(h.rt.GetCalls(), "CreateContainer")
	})

	short, cancel := context.WithTimeout(h.ctx, 50*time.Millisecond)
	defer cancel()
	_, err := h.node.Apply(short, pod, nil, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("Apply past its deadline = %v, want DeadlineExceeded", err)
	}

	second := make(chan engine.ApplyResult, 1)
	go func() {
		res, err := h.node.Apply(h.ctx, pod, nil, nil, nil)
		if err != nil {
			t.Errorf("second Apply: %v", err)
		}
		second <- res
	}()
	close(gate)
	if err := <-first; err != nil {
		t.Fatalf("first Apply: %v", err)
	}
	res := <-second
	if res.Status.Phase != corev1.PodRunning {
		t.Errorf("second Apply: phase %s", res.Status.Phase)
	}
	for _, s := range res.Steps {
		if s.Action == syncer.ActionStartContainer {
			t.Errorf("second Apply started %s again", s.Target)
		}
	}
}

// TestNodeWorkerRestartsWithoutACall: an exited container is restarted
// by the worker on the runtime's hint; the second exit waits for the
// back-off timer.
func TestNodeWorkerRestartsWithoutACall(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t, func(o *engine.NodeOptions) { o.Backoff = plan.BackoffPolicy{Base: 10 * time.Second} })
	pod := enginetest.Pod()
	var mu sync.Mutex
	var observed []string
	stop := h.node.ObserveSteps(pod.UID, func(st syncer.StepResult) {
		mu.Lock()
		defer mu.Unlock()
		observed = append(observed, string(st.Action)+" "+st.Target)
	})
	defer stop()
	h.apply(pod)
	mu.Lock()
	if len(observed) != 0 {
		t.Errorf("observed Apply's own steps: %v", observed)
	}
	mu.Unlock()
	restarts := func(n int32) func() bool {
		return func() bool {
			inst := h.view(pod).FindContainer("app")
			return inst != nil && inst.State == model.ContainerRunning && inst.RestartCount == n
		}
	}
	if err := h.rt.ExitContainer(h.view(pod).FindContainer("app").ID, 1); err != nil {
		t.Fatal(err)
	}
	h.eventually("first restart", restarts(1))
	h.eventually("the restart's step observed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(observed, string(syncer.ActionStartContainer)+" app")
	})

	h.clock.Step(time.Second)
	if err := h.rt.ExitContainer(h.view(pod).FindContainer("app").ID, 1); err != nil {
		t.Fatal(err)
	}
	h.eventually("CrashLoopBackOff in the status", func() bool {
		for _, cs := range h.storedStatus(pod).ContainerStatuses {
			if cs.Name == "app" && cs.State.Waiting != nil && cs.State.Waiting.Reason == plan.ReasonCrashLoopBackOff {
				return true
			}
		}
		return false
	})
	if restarts(2)() {
		t.Fatal("restarted during the back-off")
	}
	// The status may show the back-off first: the pass that restarted
	// the container can see its exit as it ends; the pass its exit
	// hints at then meets the back-off and reports it.
	h.eventually("a BackOff event", func() bool { return slices.Contains(h.events(pod), engine.EventBackOff) })
	if restarts(2)() {
		t.Fatal("restarted during the back-off")
	}
	// The worker arms its back-off timer after it records the status: if
	// it did so after this step, the clock must move on for it to fire.
	h.clock.Step(11 * time.Second)
	h.eventually("restart after the back-off", func() bool {
		if restarts(2)() {
			return true
		}
		h.clock.Step(time.Second)
		return false
	})
}

// TestNodeExitIsPublishedBeforeTheRestart: watchers see a container's
// exit (terminated, exit code 1) as its own status, before the status of
// the restarted instance; both name the pod's sandbox.
func TestNodeExitIsPublishedBeforeTheRestart(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	h.apply(pod)
	sbID, attempt, ok := h.node.PodSandbox(pod.UID)
	if !ok {
		t.Fatal("no sandbox after the apply")
	}
	w, err := h.st.Watch(h.ctx, h.st.Revision())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.rt.ExitContainer(h.view(pod).FindContainer("app").ID, 1); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for e := range w.Events() {
		if e.Kind != store.KindStatus {
			continue
		}
		if e.Sandbox != (store.SandboxRef{ID: sbID, Attempt: attempt}) {
			t.Errorf("status at revision %d names sandbox %+v, want %s (attempt %d)", e.Revision, e.Sandbox, sbID, attempt)
		}
		for _, cs := range e.Status.ContainerStatuses {
			if cs.Name != "app" {
				continue
			}
			switch {
			case cs.State.Terminated != nil:
				seen = append(seen, fmt.Sprintf("terminated(%d) restarts=%d", cs.State.Terminated.ExitCode, cs.RestartCount))
			case cs.State.Running != nil:
				seen = append(seen, fmt.Sprintf("running restarts=%d", cs.RestartCount))
			}
		}
		if len(seen) > 0 && strings.HasPrefix(seen[len(seen)-1], "running restarts=1") {
			break
		}
	}
	if want := []string{"terminated(1) restarts=0", "running restarts=1"}; !slices.Equal(seen, want) {
		t.Errorf("app's statuses = %q, want %q", seen, want)
	}
}

// TestNodeNoOpPassIsCheap: passes of a converged pod write nothing to the
// runtime and append nothing to the store.
func TestNodeNoOpPassIsCheap(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	h.apply(pod)
	h.apply(pod) // the pass after the start settles the status
	writes, rev := h.writes(), h.st.Revision()
	for range 3 {
		h.clock.Step(time.Second)
		res := h.apply(pod)
		if len(res.Steps) != 0 {
			t.Errorf("no-op pass did %v", res.Steps)
		}
	}
	if got := h.writes(); got != writes {
		t.Errorf("no-op passes made %d CRI writes", got-writes)
	}
	if got := h.st.Revision(); got != rev {
		t.Errorf("no-op passes moved the store from revision %d to %d", rev, got)
	}
}

// TestNodeReasonCache: the waiting reason of a failed start shows at
// once (ErrImagePull), and the back-off after it (ImagePullBackOff).
func TestNodeReasonCache(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	waiting := func(st corev1.PodStatus, name string) string {
		for _, cs := range st.ContainerStatuses {
			if cs.Name == name && cs.State.Waiting != nil {
				return cs.State.Waiting.Reason
			}
		}
		return ""
	}

	pull := enginetest.Pod()
	pull.Spec.Containers = pull.Spec.Containers[:1]
	pull.Spec.Containers[0].Image = "registry.local/missing:1"
	h.rt.InjectError("PullImage", errors.New("manifest unknown"))
	if got := waiting(h.apply(pull).Status, "app"); got != podstatus.ReasonErrImagePull {
		t.Errorf("after the first failed pull: %q, want ErrImagePull", got)
	}
	if got := waiting(h.apply(pull).Status, "app"); got != plan.ReasonImagePullBackOff {
		t.Errorf("during the pull back-off: %q, want ImagePullBackOff", got)
	}

	never := enginetest.Pod()
	never.Name, never.UID = "never", "uid-never"
	never.Spec.Containers = never.Spec.Containers[:1]
	never.Spec.Containers[0].Image = "registry.local/absent:1"
	never.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	if got := waiting(h.apply(never).Status, "app"); got != syncer.ReasonErrImageNeverPull {
		t.Errorf("image absent with policy Never: %q, want ErrImageNeverPull", got)
	}

	cfg := enginetest.Pod()
	cfg.Name, cfg.UID = "config", "uid-config"
	cfg.Spec.Containers = cfg.Spec.Containers[:1]
	cfg.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "k"}}}}
	if got := waiting(h.apply(cfg).Status, "app"); got != syncer.ReasonCreateContainerConfigErr {
		t.Errorf("missing ConfigMap: %q, want CreateContainerConfigError", got)
	}
	// The ConfigMap arrives: the next Apply starts the container and the
	// reason goes.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "absent", Namespace: cfg.Namespace}, Data: map[string]string{"k": "v"}}
	res, err := h.node.Apply(h.ctx, cfg, []*corev1.ConfigMap{cm}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := waiting(res.Status, "app"); got != "" {
		t.Errorf("after the ConfigMap arrived: waiting %q", got)
	}
}

// TestNodeDelete: Delete kills and removes everything of the pod, its
// directories and its record; the deletion is in the revision log; a
// second Delete finds nothing.
func TestNodeDelete(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	h.apply(pod)
	podDir := criconfig.PodDir(pod, h.cfg)
	if _, err := os.Stat(podDir); err != nil {
		t.Fatalf("pod dir: %v", err)
	}
	grace := int64(0)
	res, err := h.node.Delete(h.ctx, pod.Namespace, pod.Name, string(pod.UID), &grace)
	found, steps := res.Found, res.Steps
	if err != nil || !found {
		t.Fatalf("Delete = %v, %v", found, err)
	}
	if !slices.ContainsFunc(steps, func(s syncer.StepResult) bool { return s.Action == syncer.ActionKillContainer }) {
		t.Errorf("steps %v kill no container", steps)
	}
	sbs, _ := h.rt.ListPodSandbox(h.ctx, nil)
	ctrs, _ := h.rt.ListContainers(h.ctx, nil)
	if len(sbs) != 0 || len(ctrs) != 0 {
		t.Errorf("left %d sandboxes and %d containers", len(sbs), len(ctrs))
	}
	for _, d := range []string{podDir, criconfig.PodLogDirectory(pod, h.cfg)} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed: %v", d, err)
		}
	}
	if _, err := h.node.Get(h.ctx, pod.Namespace, pod.Name); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after Delete = %v", err)
	}
	entries, _ := h.st.Since(0)
	if len(entries) == 0 || entries[len(entries)-1].Kind != store.KindDeleted {
		t.Errorf("revision log does not end with the deletion")
	}
	if res, err := h.node.Delete(h.ctx, pod.Namespace, pod.Name, "", nil); res.Found || err != nil {
		t.Errorf("second Delete = %v, %v", res.Found, err)
	}
}

// TestNodeRecovery: a new Node on the same store and runtime adopts the
// stored pods without restarting anything, removes what is left of pods
// the store recorded deleting, keeps podsync's objects of pods the store
// never held (orphans; see TestOrphansKeptUnlessRemoveOrphans), and
// finishes interrupted deletions.
func TestNodeRecovery(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	h.apply(pod)
	before := h.view(pod)

	deleting := enginetest.Pod()
	deleting.Name, deleting.UID = "deleting", "uid-deleting"
	h.apply(deleting)
	leftover := enginetest.Pod()
	leftover.Name, leftover.UID = "leftover", "uid-leftover"
	h.apply(leftover)

	h.stop()
	// A deletion the store recorded whose runtime objects remain.
	if _, err := h.st.Delete(leftover.UID); err != nil {
		t.Fatal(err)
	}
	// While podsync is down: a deletion was requested, and a pod was
	// created that the store never held (of a lost store, or another
	// podsyncd).
	if _, err := h.st.MarkDeleting(deleting.UID, new(int64)); err != nil {
		t.Fatal(err)
	}
	orphan := enginetest.Pod()
	orphan.Name, orphan.UID = "orphan", "uid-orphan"
	s, err := syncer.NewSyncer(syncer.SyncerOptions{Runtime: h.rt, Images: h.rt, Clock: h.clock, Config: h.cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncPod(h.ctx, orphan, syncer.SyncInput{}, nil); err != nil {
		t.Fatal(err)
	}
	// An object podsync did not create.
	foreign, err := h.rt.RunPodSandbox(h.ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "foreign", Namespace: "x", Uid: "uid-foreign"},
		Labels:   map[string]string{"io.kubernetes.pod.uid": "uid-foreign"}}, "")
	if err != nil {
		t.Fatal(err)
	}

	h.start()
	h.eventually("leftover and deleted pod removed", func() bool {
		return len(h.view(leftover).Sandboxes) == 0 && len(h.view(deleting).Sandboxes) == 0
	})
	if v := h.view(orphan); len(v.Sandboxes) != 1 || v.Sandboxes[0].State != model.SandboxReady {
		t.Errorf("orphan's sandboxes %v, want it kept running", v.Sandboxes)
	}
	h.eventually("the sweep forgets the leftover's deletion", func() bool {
		h.clock.Step(time.Hour)
		deleted, err := h.st.Deleted(leftover.UID)
		return err == nil && !deleted
	})
	h.eventually("deleted pod forgotten", func() bool {
		_, err := h.st.Get(deleting.UID)
		return errors.Is(err, errdefs.ErrPodNotFound)
	})
	res := h.apply(pod)
	after := h.view(pod)
	if len(after.Sandboxes) != 1 || after.Sandboxes[0].ID != before.Sandboxes[0].ID {
		t.Errorf("sandboxes %v, want only %s", after.Sandboxes, before.Sandboxes[0].ID)
	}
	for _, c := range before.Containers {
		inst := after.FindContainer(c.Name)
		if inst == nil || inst.ID != c.ID || inst.State != model.ContainerRunning {
			t.Errorf("container %s: %+v, want %s still running", c.Name, inst, c.ID)
		}
	}
	if len(res.Steps) != 0 {
		t.Errorf("pass after recovery did %v", res.Steps)
	}
	if _, err := h.rt.PodSandboxStatus(h.ctx, foreign, false); err != nil {
		t.Errorf("foreign sandbox touched: %v", err)
	}
}

// TestNodeRotateLogs: a log above MaxSize is renamed with a timestamp,
// the runtime reopens it, and only MaxFiles-1 rotated files are kept.
func TestNodeRotateLogs(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		o.LogRotation = engine.LogRotation{MaxSize: 100, MaxFiles: 3, Period: time.Hour}
	})
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	h.apply(pod)
	id := h.view(pod).FindContainer("app").ID
	resp, err := h.rt.ContainerStatus(h.ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	path := resp.GetStatus().GetLogPath()
	statusReads := func() int { return countCalls(h, "ContainerStatus") }
	for i := range 4 {
		if err := h.rt.WriteLog(id, "stdout", strings.Repeat("x", 200)); err != nil {
			t.Fatal(err)
		}
		before := statusReads()
		h.node.Logs().Rotate(h.ctx)
		// The log path is read once, in the first round.
		if read := statusReads() - before; i > 0 && read != 0 {
			t.Errorf("rotation %d read the container's status %d times; its log path was known", i, read)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("rotation %d: live log still there (%v)", i, err)
		}
		h.clock.Step(time.Second)
	}
	rotated, _ := filepath.Glob(path + ".*")
	if len(rotated) != 2 {
		t.Errorf("rotated files %v, want 2", rotated)
	}
	if want := syncertest.T0.Add(2 * time.Second).UTC().Format("20060102-150405"); len(rotated) > 0 && !strings.HasSuffix(rotated[0], want) {
		t.Errorf("oldest kept %s, want suffix %s", rotated[0], want)
	}
	reopened := countCalls(h, "ReopenContainerLog")
	if reopened != 4 {
		t.Errorf("ReopenContainerLog called %d times, want 4", reopened)
	}
	// A small log stays.
	if err := os.WriteFile(path, []byte("small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.node.Logs().Rotate(h.ctx)
	if _, err := os.Stat(path); err != nil {
		t.Errorf("small log rotated: %v", err)
	}
}

// TestNodeTerminalPodStaysDead: a restartPolicy Never pod whose container
// failed becomes Failed; its sandbox is stopped and nothing restarts.
func TestNodeTerminalPodStaysDead(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Containers = pod.Spec.Containers[:1]
	h.apply(pod)
	if err := h.rt.ExitContainer(h.view(pod).FindContainer("app").ID, 3); err != nil {
		t.Fatal(err)
	}
	h.eventually("phase Failed and sandbox stopped", func() bool {
		v := h.view(pod)
		return h.storedStatus(pod).Phase == corev1.PodFailed && len(v.Sandboxes) == 1 && v.Sandboxes[0].State == model.SandboxNotReady
	})
	writes := h.writes()
	res := h.apply(pod)
	if len(res.Steps) != 0 || h.writes() != writes {
		t.Errorf("pass of a finished terminal pod did %v", res.Steps)
	}
	if inst := h.view(pod).FindContainer("app"); inst.State != model.ContainerExited || inst.RestartCount != 0 {
		t.Errorf("container %+v restarted", inst)
	}
}

// TestNodeProbeUpdateTriggersPass: a readiness result arriving from the
// prober makes the worker recompute the status (nothing else triggers a
// pass here), and a failing liveness probe restarts the container.
func TestNodeProbeUpdateTriggersPass(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	probe := func(code string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "exit " + code}}},
			PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
	}
	pod.Spec.Containers[0].ReadinessProbe = probe("0")
	// Not before a second on the node's clock, which only the test steps:
	// without a delay the prober's first run could pass before the
	// apply's pass computed its status.
	pod.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 1
	res := h.apply(pod)
	// The apply's pass ran before the probe.
	if res.Status.Conditions == nil || res.Status.ContainerStatuses[0].Ready {
		t.Fatal("ready before the readiness probe ran")
	}
	h.eventually("Ready after the probe passed", func() bool {
		h.clock.Step(time.Second)
		return h.storedStatus(pod).ContainerStatuses[0].Ready
	})

	live := enginetest.Pod()
	live.Name, live.UID = "live", "uid-live"
	live.Spec.Containers = live.Spec.Containers[:1]
	live.Spec.Containers[0].LivenessProbe = probe("1")
	first := h.apply(live).Status.ContainerStatuses[0].ContainerID
	h.eventually("restarted by the liveness probe", func() bool {
		h.clock.Step(time.Second)
		cs := h.storedStatus(live).ContainerStatuses[0]
		return cs.ContainerID != first && cs.RestartCount >= 1
	})
	// The prober publishes the result, which a pass may act on, before
	// the node records the event.
	h.eventually("Unhealthy and Killing events", func() bool {
		ev := h.events(live)
		return slices.Contains(ev, engine.EventUnhealthy) && slices.Contains(ev, engine.EventKilling)
	})
}

// TestNodeDeleteCancelsARunningPass: Delete does not wait for a pass
// stuck in an enginetest.Image pull; the Apply that ran it fails with ErrConflict.
func TestNodeDeleteCancelsARunningPass(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	h.rt.mu.Lock()
	h.rt.pullGate = true
	h.rt.mu.Unlock()
	pod := enginetest.Pod()
	pod.Spec.Containers[0].Image = "registry.local/slow:1"
	applied := make(chan error, 1)
	go func() {
		_, err := h.node.Apply(h.ctx, pod, nil, nil, nil)
		applied <- err
	}()
	h.eventually("pass blocked in PullImage", func() bool {
		return h.rt.pulling.Load()
	})
	res, err := h.node.Delete(h.ctx, pod.Namespace, pod.Name, "", new(int64))
	found := res.Found
	if err != nil || !found {
		t.Fatalf("Delete = %v, %v", found, err)
	}
	if err := <-applied; !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("Apply = %v, want ErrConflict", err)
	}
	if sbs, _ := h.rt.ListPodSandbox(h.ctx, nil); len(sbs) != 0 {
		t.Errorf("sandboxes left: %d", len(sbs))
	}
}

// TestNodeAdmissionAndPolicy wires the real admission: a new pod beyond
// the node's CPU is refused with OutOfcpu and not stored; a known pod is
// checked against the policy on every apply.
func TestNodeAdmissionAndPolicy(t *testing.T) {
	t.Parallel()
	admitFn, policyFn := engine.Admission(
		admit.Node{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		admit.Policy{})
	h := newNodeHarness(t, func(o *engine.NodeOptions) { o.Admit, o.Policy = admitFn, policyFn })

	big := enginetest.Pod()
	big.Name, big.UID = "big", "uid-big"
	big.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	_, err := h.node.Apply(h.ctx, big, nil, nil, nil)
	var ae *engine.AdmissionError
	if !errors.As(err, &ae) || ae.Reason() != admit.ReasonOutOfCPU || !errors.Is(err, errdefs.ErrAdmission) {
		t.Fatalf("Apply(big) = %v, want an AdmissionError OutOfcpu", err)
	}
	if _, err := h.st.Get(big.UID); !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("refused pod stored: %v", err)
	}

	pod := enginetest.Pod()
	h.apply(pod)
	changed := pod.DeepCopy()
	changed.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	_, err = h.node.Apply(h.ctx, changed, nil, nil, nil)
	if !errors.As(err, &ae) || ae.Reason() != admit.ReasonPodSecurity {
		t.Fatalf("Apply(privileged) = %v, want an AdmissionError PodSecurity", err)
	}
	rec, err := h.st.Get(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if sc := rec.Pod.Spec.Containers[0].SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
		t.Error("the refused spec was stored")
	}
}

// TestNodeSkipsPassesForChangesItSaw: the container events of a pass's
// own creates and starts, and a relist finding the pod as the pass left
// it, cost no pass; an exit from outside does, as does a retry timer.
func TestNodeSkipsPassesForChangesItSaw(t *testing.T) {
	t.Parallel()
	reg, m := newMetrics(t, metrics.Options{})
	h := newNodeHarness(t, func(o *engine.NodeOptions) { o.Metrics = m })
	passes := func() uint64 {
		var n uint64
		for _, o := range []string{metrics.PassSuccess, metrics.PassStepFailed, metrics.PassError, metrics.PassCanceled} {
			c, _ := observations(t, reg, metrics.MetricSyncPassDuration, "outcome", o)
			n += c
		}
		return n
	}
	skipped := func() float64 { return value(t, reg, metrics.MetricSyncPassesSkipped) }
	// The node's first relist has run (its hints pass or skip at once).
	h.eventually("the first relist", func() bool { return len(h.rt.GetCalls()) > 0 })

	pod := enginetest.Pod()
	h.apply(pod)
	// Its events: CREATED and STARTED of the sandbox's containers, seen
	// by the Apply's pass, which read the runtime after them.
	h.eventually("the pass's own events skipped", func() bool { return skipped() >= 1 })
	// A pass for them would follow the skip within milliseconds on the
	// fake runtime.
	time.Sleep(100 * time.Millisecond)
	if got := passes(); got != 1 {
		t.Errorf("%d passes after one Apply of a new pod, want 1 (events of its own steps skipped)", got)
	}

	// A relist finding the pod as the pass left it.
	before := skipped()
	h.clock.Step(time.Hour)
	h.eventually("the relist's hint skipped", func() bool { return skipped() > before })
	if got := passes(); got != 1 {
		t.Errorf("%d passes after a relist of a converged pod, want 1", got)
	}

	// An exit the pass did not see runs a pass: the restart.
	if err := h.rt.ExitContainer(h.view(pod).FindContainer("app").ID, 1); err != nil {
		t.Fatal(err)
	}
	h.eventually("restart after an exit", func() bool {
		inst := h.view(pod).FindContainer("app")
		return inst != nil && inst.State == model.ContainerRunning && inst.RestartCount == 1
	})
	h.eventually("the restart's pass observed", func() bool { return passes() >= 2 })
	// The exit's CRI event woke the worker, and says so.
	if got := value(t, reg, metrics.MetricRuntimeHints, "source", "cri_events"); got < 1 {
		t.Errorf("%s{source=cri_events} = %v after a restart on an exit event, want ≥ 1", metrics.MetricRuntimeHints, got)
	}
}

// TestNodeRunsPassForWhatItsPassDidNotPlan: an init container that exits
// while the pass that started it runs shows exited in the pass's last
// read, which the pass did not plan from: its exit event must still run
// the pass that starts the next container.
func TestNodeRunsPassForWhatItsPassDidNotPlan(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	pod.Spec.InitContainers = []corev1.Container{enginetest.Container("init", "true")}
	h.apply(pod)
	h.eventually("the app started after its init container", func() bool {
		inst := h.view(pod).FindContainer("app")
		return inst != nil && inst.State == model.ContainerRunning
	})
}

// listSpy records the pod UIDs of the lists of one pod's objects.
type listSpy struct {
	syncer.Runtime
	mu    sync.Mutex
	lists map[types.UID]int
}

func (s *listSpy) note(sel map[string]string) {
	if uid := sel[model.LabelPodUID]; uid != "" {
		s.mu.Lock()
		s.lists[types.UID(uid)]++
		s.mu.Unlock()
	}
}

func (s *listSpy) listsOf(uid types.UID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists[uid]
}

func (s *listSpy) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	s.note(f.GetLabelSelector())
	return s.Runtime.ListPodSandbox(ctx, f)
}

func (s *listSpy) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	s.note(f.GetLabelSelector())
	return s.Runtime.ListContainers(ctx, f)
}

// TestNodeFirstPassOfANewPodDoesNotList: the runtime holds nothing of a
// pod the node has never run and did not find when it started, so its
// first pass plans from an empty view without listing; every later pass
// lists, and so does the first pass of a pod the runtime held at start
// (an orphan applied again keeps its one sandbox).
func TestNodeFirstPassOfANewPodDoesNotList(t *testing.T) {
	t.Parallel()
	spy := &listSpy{lists: map[types.UID]int{}}
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		spy.Runtime = o.Runtime
		o.Runtime = spy
	})
	pod := enginetest.Pod()
	h.apply(pod)
	if n := spy.listsOf(pod.UID); n != 0 {
		t.Errorf("the first pass of a new pod listed the runtime %d times, want 0", n)
	}
	if v := h.view(pod); len(v.Sandboxes) != 1 || v.FindContainer("app") == nil {
		t.Fatalf("the new pod does not run: %+v", v)
	}
	before := spy.listsOf(pod.UID)
	if _, err := h.node.Apply(h.ctx, pod, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if spy.listsOf(pod.UID) == before {
		t.Error("the second pass did not list the runtime")
	}
	h.stop()

	// A pod whose objects the runtime holds, unknown to the store.
	orphan := enginetest.Pod()
	orphan.Name, orphan.UID = "orphan", "uid-orphan"
	s, err := syncer.NewSyncer(syncer.SyncerOptions{Runtime: h.rt, Images: h.rt, Clock: h.clock, Config: h.cfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncPod(h.ctx, orphan, syncer.SyncInput{}, nil); err != nil {
		t.Fatal(err)
	}
	h.start()
	before = spy.listsOf(orphan.UID)
	res := h.apply(orphan)
	if spy.listsOf(orphan.UID) == before {
		t.Error("the first pass of a pod the runtime held at start did not list it")
	}
	// Planned from what the runtime holds: the sandbox kept, nothing
	// created (a pass planning from an empty view tries a second one).
	for _, st := range res.Steps {
		if st.Err != nil || st.Action == syncer.ActionCreatePodSandbox {
			t.Errorf("step %s %s (%v) adopting the orphan's sandbox", st.Action, st.Target, st.Err)
		}
	}
	if v := h.view(orphan); len(v.Sandboxes) != 1 {
		t.Errorf("%d sandboxes of the orphan applied again, want 1", len(v.Sandboxes))
	}
}

// ContainerStats forwards the runtime's writable layers (the housekeeping
// measures them).
func (s *listSpy) ContainerStats(ctx context.Context, id string) (*runtimeapi.ContainerStats, error) {
	return s.Runtime.(interface {
		ContainerStats(context.Context, string) (*runtimeapi.ContainerStats, error)
	}).ContainerStats(ctx, id)
}

// The status says which generation of the pod it is of, as the kubelet's
// status.observedGeneration: 1 for the pod as first applied, then one
// more for each change of the stored pod.
func TestNodeStatusObservesTheGeneration(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	res := h.apply(pod)
	if res.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration after the first apply = %d, want 1", res.Status.ObservedGeneration)
	}
	if got := h.storedStatus(pod); got.ObservedGeneration != 1 {
		t.Errorf("stored observedGeneration = %d, want 1", got.ObservedGeneration)
	}
	// The same pod again is no change.
	if res := h.apply(pod); res.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration after the same apply = %d, want 1", res.Status.ObservedGeneration)
	}
	changed := pod.DeepCopy()
	ads := int64(600)
	changed.Spec.ActiveDeadlineSeconds = &ads
	if res := h.apply(changed); res.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration after a change = %d, want 2", res.Status.ObservedGeneration)
	}
	rec, err := h.node.Get(h.ctx, pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Generation != rec.Pod.Status.ObservedGeneration {
		t.Errorf("record generation %d, status observedGeneration %d: want equal once converged", rec.Generation, rec.Pod.Status.ObservedGeneration)
	}
}

// TestNodeSpecLockIsThePods: the read and store of a pod's spec is
// serialised with the other applies of that pod only; a pod's store does
// not wait for another pod's, so the stores of pods applied together can
// share the store's commits.
func TestNodeSpecLockIsThePods(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	held := enginetest.Pod()
	h.apply(held)
	other := enginetest.Pod()
	other.Name, other.UID = "cart", "uid-cart"

	unlock := h.node.LockSpec(held.Namespace, held.Name)
	update := held.DeepCopy()
	update.Labels = map[string]string{"rev": "2"}
	updated := make(chan error, 1)
	go func() {
		_, err := h.node.Apply(h.ctx, update, nil, nil, nil)
		updated <- err
	}()
	// Another pod is stored and run while the first pod's lock is held.
	if res := h.apply(other); !res.Created || res.Status.Phase != corev1.PodRunning {
		t.Fatalf("Apply of another pod = created %v, phase %s", res.Created, res.Status.Phase)
	}
	// The held pod's update waits for its lock.
	select {
	case err := <-updated:
		t.Fatalf("Apply of the held pod returned (%v) while its spec lock was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	unlock()
	if err := <-updated; err != nil {
		t.Fatalf("Apply of the held pod after its lock: %v", err)
	}
	rec, err := h.st.Get(held.UID)
	if err != nil || rec.Pod.Labels["rev"] != "2" || rec.Generation != 2 {
		t.Fatalf("stored pod = %+v, %v; want the update at generation 2", rec, err)
	}
}
