package podworkers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/prober"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/watch"
	"github.com/podsync/podsync/logx"
)

// PodSyncer runs the sync passes of the pod workers: syncer.Syncer
// implements it against CRI. The workers never run two calls for one pod
// at a time: each pod's worker holds its one lock across a call.
type PodSyncer interface {
	// SyncPod runs one pass of pod (see syncer.Syncer.SyncPod).
	SyncPod(ctx context.Context, pod *corev1.Pod, in syncer.SyncInput, emit func(syncer.StepResult)) (syncer.SyncResult, error)
	// RemovePod removes everything the runtime and the node's directories
	// hold for pod (see syncer.Syncer.RemovePod).
	RemovePod(ctx context.Context, pod *corev1.Pod) error
	// ReadView reads the runtime's view of the pod with uid.
	ReadView(ctx context.Context, uid types.UID) (model.RuntimeView, error)
}

var _ PodSyncer = (*syncer.Syncer)(nil)

// Prober is what the workers need of the probe manager (prober.Manager):
// they hand it the running containers after each pass and read its
// results when they plan and compute a status.
type Prober interface {
	// Sync makes the probes of pod's running containers those running.
	Sync(pod *corev1.Pod, running []prober.RunningContainer)
	// RemovePod stops every probe of the pod with uid.
	RemovePod(uid types.UID)
	// Results returns the last results of the pod's probes.
	Results(uid types.UID) model.ProbeResults
}

var _ Prober = (*prober.Manager)(nil)

// Metrics count what the workers decide without a pass
// (metrics.Metrics implements it).
type Metrics interface {
	// ObserveSkippedPass counts a pass a worker skipped: its last pass
	// had seen what asked for it.
	ObserveSkippedPass()
	// ObserveHintPass counts a pass the runtime's hints of sources woke.
	ObserveHintPass(sources watch.Source)
}

// Admission admits a known pod's resize (the node's admission).
type Admission interface {
	// AdmitResize reports whether pod, with its new requests, fits beside
	// the node's other active pods, with the kubelet's message when it
	// does not.
	AdmitResize(pod *corev1.Pod) (bool, string)
}

// Unstored decides about what the runtime holds of a pod the store does
// not hold (the node's orphans).
type Unstored interface {
	// MayRemove reports whether the node may remove it: a pod the node
	// deleted (or any, with RemoveOrphans). Otherwise it is an orphan.
	MayRemove(uid types.UID) (bool, error)
	// Keep notes ref as an orphan the node keeps running.
	Keep(ref model.PodRef)
	// RuntimePod returns the pod the runtime's objects with uid belong
	// to; found is false when the runtime holds none.
	RuntimePod(ctx context.Context, uid types.UID) (ref model.PodRef, found bool, err error)
}

// Options configure the pod workers.
type Options struct {
	// Store holds the desired pods and the revision log; required.
	Store *store.Store
	// Syncer runs the passes; required.
	Syncer PodSyncer
	// Prober probes the running containers; required.
	Prober Prober
	// Clock paces retries; nil means the real clock.
	Clock clock.WithTicker
	// Logger receives the workers' logs; nil discards.
	Logger *zap.Logger
	// Backoff is the crash-loop and image-pull back-off; the zero value is
	// the kubelet's.
	Backoff plan.BackoffPolicy
	// Config are the node settings; probes of host-network pods dial
	// Config.NodeIPs[0], statuses report Config.NodeIPs.
	Config criconfig.Options
	// Metrics, if set, count skipped and hinted passes.
	Metrics Metrics
	// Admission, if set, admits resizes; nil admits every one.
	Admission Admission
	// Unstored decides about the runtime's objects of pods the store
	// does not hold; nil removes them all.
	Unstored Unstored
}

// Workers are the kubelet's pod workers (pkg/kubelet/pod_workers.go) for
// the pods of one node: one logical worker per pod UID, which owns the
// pod's one lock (held for a pass, never across waits), its retry timer
// and failure delay, its reason cache, its back-off events, its failed
// image pulls and its lifecycle state, and runs a pass through the
// PodSyncer whenever the pod may have changed (an Apply or a deletion, a
// hint from the runtime watcher, a back-off or retry timer, a probe
// result). After each pass a worker feeds the running containers to the
// prober and records the pod's status and events in the store.
//
// Build them with New; Start starts the loops once the node has
// recovered, Stop ends them. Every method is safe for concurrent use.
type Workers struct {
	store    *store.Store
	syncer   PodSyncer
	prober   Prober
	clock    clock.WithTicker
	log      *zap.Logger
	backoff  plan.BackoffPolicy
	cfg      criconfig.Options
	metrics  Metrics
	admitter Admission
	unstored Unstored

	// wg counts the worker loops.
	wg sync.WaitGroup

	mu       sync.Mutex
	loopsOn  bool // worker loops may start
	stopping bool // Stop was called: no new loop
	runCtx   context.Context
	workers  map[types.UID]*worker

	obsMu     sync.Mutex
	observers map[types.UID][]*stepObserver

	// resizes are the pods whose last pass left a resize pending.
	resizes pendingResizes

	// mayHoldMu guards mayHold, the pods the runtime may hold objects of:
	// those it held or the store held when the node started, and every
	// pod a pass has run for since (nil until SeedMayHold). Only the
	// workers' passes create objects of a pod, so the first pass of any
	// other pod plans from an empty view without listing (claimNew).
	mayHoldMu sync.Mutex
	mayHold   map[types.UID]bool
}

// New returns the pod workers of a node. It fails with ErrInvalidSpec if
// Store, Syncer or Prober is missing.
func New(opts Options) (*Workers, error) {
	if opts.Store == nil || opts.Syncer == nil || opts.Prober == nil {
		return nil, fmt.Errorf("podworkers: Options need a Store, a Syncer and a Prober: %w", errdefs.ErrInvalidSpec)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Metrics == nil {
		opts.Metrics = noMetrics{}
	}
	return &Workers{
		store: opts.Store, syncer: opts.Syncer, prober: opts.Prober, clock: opts.Clock, log: opts.Logger,
		backoff: opts.Backoff, cfg: opts.Config, metrics: opts.Metrics, admitter: opts.Admission, unstored: opts.Unstored,
		workers: map[types.UID]*worker{},
	}, nil
}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) ObserveSkippedPass()          {}
func (noMetrics) ObserveHintPass(watch.Source) {}

// Start starts a loop for every worker, and for every worker made from
// then on, each running a first pass at once; the loops end with ctx or
// Stop.
func (p *Workers) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runCtx = ctx
	p.loopsOn = true
	for _, w := range p.workers {
		p.startLoopLocked(w)
		w.kickSelf()
	}
}

// Stop ends every worker loop and waits for them; no loop starts after.
func (p *Workers) Stop() {
	p.mu.Lock()
	p.stopping = true
	for _, w := range p.workers {
		w.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// DispatchHints passes every hint of the runtime watcher to the worker of
// its pod, until hints is closed; a pod the node does not hold gets a
// worker that removes what the runtime holds for it.
func (p *Workers) DispatchHints(hints <-chan watch.Hint) {
	for h := range hints {
		p.workerFor(h.UID).hint(h)
	}
}

// ConsumeProbes turns probe result changes into passes of their pods and
// Unhealthy events, until updates is closed (the prober stops).
func (p *Workers) ConsumeProbes(updates <-chan prober.Update) {
	for u := range updates {
		w := p.workerFor(u.PodUID)
		// The event first, as the kubelet's prober records it: the
		// pass the kick starts may kill the container (Killing).
		if ref, ok := w.podRef(); ok && u.Result == prober.Failure {
			ev := store.Event{Type: corev1.EventTypeWarning, Reason: EventUnhealthy, Container: u.ContainerName,
				Message: fmt.Sprintf("%s probe failed: %s", u.Type, u.Output)}
			if _, err := p.store.Append(store.EventChange(ref, ev)); err != nil && !errors.Is(err, errdefs.ErrPodNotFound) {
				p.log.Warn("record probe event", zap.String(logx.PodUID, string(u.PodUID)), zap.Error(err))
			}
		}
		w.kickSelf()
	}
}

// ConsumeProbeEvents records the events of probe runs (every failure,
// error and warning the prober reports besides its result changes, which
// ConsumeProbes records), until events is closed (the prober stops). The
// store counts the repeats, as the kubelet's event correlator does.
func (p *Workers) ConsumeProbeEvents(events <-chan prober.Event) {
	for e := range events {
		ref, ok := p.workerFor(e.PodUID).podRef()
		if !ok {
			continue
		}
		ev := store.Event{Type: corev1.EventTypeWarning, Reason: e.Reason, Container: e.ContainerName, Message: e.Message}
		if _, err := p.store.Append(store.EventChange(ref, ev)); err != nil && !errors.Is(err, errdefs.ErrPodNotFound) {
			p.log.Warn("record probe event", zap.String(logx.PodUID, string(e.PodUID)), zap.Error(err))
		}
	}
}

// Kick asks the worker of uid for a pass, making the worker if there is
// none (a pass of a pod the store does not hold removes what the runtime
// holds for it).
func (p *Workers) Kick(uid types.UID) { p.workerFor(uid).kickSelf() }

// Adopt gives a stored pod a worker before Start, as the node recovers:
// its first pass adopts what the runtime holds, or finishes its deletion.
func (p *Workers) Adopt(rec *store.PodRecord) {
	w := p.workerFor(rec.Pod.UID)
	w.setRef(rec.Ref())
	w.noteStatus(&rec.Pod.Status)
}

// SeedMayHold records the pods the runtime or the store held when the
// node started: until then, and for them, a first pass lists the runtime.
func (p *Workers) SeedMayHold(inRuntime map[types.UID]model.PodRef, recs []*store.PodRecord) {
	m := make(map[types.UID]bool, len(inRuntime)+len(recs))
	for uid := range inRuntime {
		m[uid] = true
	}
	for _, r := range recs {
		m[r.Pod.UID] = true
	}
	p.mayHoldMu.Lock()
	p.mayHold = m
	p.mayHoldMu.Unlock()
}

// claimNew reports whether the runtime holds nothing of the pod with uid:
// no pass has run for it and it held nothing of it when the node
// started. From then on the pod may hold objects.
func (p *Workers) claimNew(uid types.UID) bool {
	p.mayHoldMu.Lock()
	defer p.mayHoldMu.Unlock()
	if p.mayHold == nil || p.mayHold[uid] {
		return false
	}
	p.mayHold[uid] = true
	return true
}

// stepObserver is one ObserveSteps registration.
type stepObserver struct{ fn func(syncer.StepResult) }

// ObserveSteps calls fn with each step of the passes the workers run of
// the pod with uid on their own: restarts, back-offs, the next init
// container, probes' kills. (The steps of a pass run for Apply or
// Terminate go to that caller's emit.) fn is called from the pod's worker
// and must not block. The returned func ends the observation.
func (p *Workers) ObserveSteps(uid types.UID, fn func(syncer.StepResult)) (stop func()) {
	o := &stepObserver{fn: fn}
	p.obsMu.Lock()
	if p.observers == nil {
		p.observers = map[types.UID][]*stepObserver{}
	}
	p.observers[uid] = append(p.observers[uid], o)
	p.obsMu.Unlock()
	return func() {
		p.obsMu.Lock()
		defer p.obsMu.Unlock()
		list := slices.DeleteFunc(p.observers[uid], func(x *stepObserver) bool { return x == o })
		if len(list) == 0 {
			delete(p.observers, uid)
		} else {
			p.observers[uid] = list
		}
	}
}

// observe hands a step of a pass a worker runs on its own to the pod's
// observers.
func (p *Workers) observe(uid types.UID, st syncer.StepResult) {
	p.obsMu.Lock()
	list := slices.Clone(p.observers[uid])
	p.obsMu.Unlock()
	for _, o := range list {
		o.fn(st)
	}
}

// PodSandbox returns the sandbox the pod with uid ran its containers in
// after its last pass: its CRI id and attempt. ok is false if no pass has
// given the pod a sandbox since the workers started (or since it lost it).
func (p *Workers) PodSandbox(uid types.UID) (id string, attempt uint32, ok bool) {
	w := p.existing(uid)
	if w == nil {
		return "", 0, false
	}
	sb := w.lastSandbox()
	return sb.ID, sb.Attempt, sb.ID != ""
}

// PullFailures returns the failed image pulls of the pod with uid as its
// last pass left them.
func (p *Workers) PullFailures(uid types.UID) []model.PullFailure {
	if w := p.existing(uid); w != nil {
		return w.pullFailures()
	}
	return nil
}

// ProbeResults returns the prober's last results of the pod with uid.
func (p *Workers) ProbeResults(uid types.UID) model.ProbeResults { return p.prober.Results(uid) }

// StatusOptions are the options a status of the node's pods is computed
// with, before a pass's own (its start failures, its resize).
func (p *Workers) StatusOptions() podstatus.StatusOptions {
	return p.statusOptions(nil)
}

func (p *Workers) statusOptions(reasons map[string]corev1.ContainerStateWaiting) podstatus.StatusOptions {
	return podstatus.StatusOptions{Backoff: p.backoff, HostIPs: p.cfg.NodeIPs, StartFailures: reasons}
}

// Ref returns the pod the worker of uid last found in the store; ok is
// false when no worker holds one.
func (p *Workers) Ref(uid types.UID) (store.PodRef, bool) {
	if w := p.existing(uid); w != nil {
		return w.podRef()
	}
	return store.PodRef{}, false
}

// existing returns the worker of uid, or nil.
func (p *Workers) existing(uid types.UID) *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.workers[uid]
}

// workerFor returns the worker of uid, creating it (and starting its loop
// once Start ran) if there is none.
func (p *Workers) workerFor(uid types.UID) *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.workers[uid]; w != nil {
		return w
	}
	parent := p.runCtx
	if parent == nil {
		parent = context.Background()
	}
	w := newWorker(parent, uid)
	p.workers[uid] = w
	if p.loopsOn {
		p.startLoopLocked(w)
	}
	return w
}

// lockWorker returns the worker of uid with its lock held, waiting while
// ctx allows.
func (p *Workers) lockWorker(ctx context.Context, uid types.UID) (*worker, error) {
	for {
		w := p.workerFor(uid)
		if err := w.acquire(ctx); err != nil {
			return nil, err
		}
		if !w.retired {
			return w, nil
		}
		w.release()
	}
}

// startLoopLocked starts w's loop unless Stop was called; p.mu is held.
func (p *Workers) startLoopLocked(w *worker) {
	if p.stopping {
		return
	}
	p.wg.Add(1)
	go p.run(w)
}

func (p *Workers) snapshot() []*worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*worker, 0, len(p.workers))
	for _, w := range p.workers {
		out = append(out, w)
	}
	return out
}

// Len is how many workers there are.
func (p *Workers) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.workers)
}

// Result is what a pass that Apply ran did.
type Result struct {
	// Status is the pod's status after the pass.
	Status corev1.PodStatus
	// Steps are the steps of the pass, in the order they finished.
	Steps []syncer.StepResult
	// NextSync is when the pod's worker will sync the pod again on its
	// own (a back-off ending, a retry); zero if only a change will.
	NextSync time.Time
	// Gone is set when the store did not hold the pod (it was deleted
	// meanwhile).
	Gone bool
}

// ErrNoTurn is the error of Apply and Terminate when their context ended
// while they waited for the pod's turn; it wraps the context's cause.
var ErrNoTurn = errors.New("wait for the pod's turn")

// Apply runs one pass of the stored pod with uid now, in the pod's turn:
// a pass of the pod already running (its worker's, another caller's) is
// waited for while ctx allows. Each step of the pass is passed to emit (if
// not nil) as it finishes. If ctx ends, the worker finishes the work.
func (p *Workers) Apply(ctx context.Context, uid types.UID, emit func(syncer.StepResult)) (Result, error) {
	w, err := p.lockWorker(ctx, uid)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrNoTurn, err)
	}
	out, err := p.pass(ctx, w, false, emit)
	w.release()
	if ctx.Err() != nil {
		w.kickSelf()
	}
	return Result{Status: out.status, Steps: out.steps, NextSync: out.next, Gone: out.gone}, err
}

// Terminate runs the deletion of pod: mark marks it deleting in the
// store (its error is returned as it is, and nothing else happens), the
// pass running, if any, is cancelled with cause, and a pass in the pod's
// turn kills it within its grace period, records its last status (its
// containers terminated), removes what the runtime and the node's
// directories hold for it and then its record. The pass's steps and that
// status are returned. If ctx ends first, the worker finishes the
// deletion.
func (p *Workers) Terminate(ctx context.Context, pod *corev1.Pod, mark func() error, cause error) (Result, error) {
	dw := p.workerFor(pod.UID)
	dw.deleters.Add(1)
	defer func() {
		if dw.deleters.Add(-1) == 0 {
			// Whatever this call left undone is the worker's.
			p.Kick(pod.UID)
		}
	}()
	if err := mark(); err != nil {
		return Result{}, err
	}
	logx.From(ctx, p.log).Info("pod deletion requested", logx.Pod(pod)...)
	// The pass running, if any, would only delay the kill.
	dw.cancelPass(cause)
	w, err := p.lockWorker(ctx, pod.UID)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrNoTurn, err)
	}
	var steps []syncer.StepResult
	out, err := p.pass(ctx, w, false, func(s syncer.StepResult) { steps = append(steps, s) })
	w.release()
	return Result{Status: out.status, Steps: steps, Gone: out.gone}, err
}

// RemoveNow removes what the runtime holds of ref, a pod the store does
// not hold, in its worker's turn, and retires the worker; the node's
// recovery removes its own leftovers so. A failure leaves the worker
// (and the removal) to the garbage collector.
func (p *Workers) RemoveNow(ctx context.Context, ref model.PodRef) error {
	w := p.workerFor(ref.UID)
	if err := w.acquire(ctx); err != nil {
		return err
	}
	defer w.release()
	if err := p.removeOrphan(ctx, ref); err != nil {
		return err
	}
	p.retire(w)
	return nil
}
