package runpods

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// Pods are the node's stored pods and revision log, which Run watches
// for the statuses of the pods it runs (engine.Node implements it).
type Pods interface {
	// ListShared returns the stored pods and the revision to watch from;
	// the records are shared and only read.
	ListShared(ctx context.Context, f store.Filter) ([]*store.PodRecord, int64, error)
	// Watch follows the revision log after since.
	Watch(ctx context.Context, since int64) (*store.Watcher, error)
	// ObserveSteps reports the steps of the passes the node runs of a pod
	// on its own, after Apply's.
	ObserveSteps(uid types.UID, fn func(syncer.StepResult)) (stop func())
	// Events lists the pods' events, one per series (the node's Events),
	// for a timeout's message.
	Events(ctx context.Context, f store.EventFilter) ([]store.Entry, int64, error)
}

// AdmitFunc is the node's admission of a batch: one result per pod, in
// order, and for each admitted pod the release of its reservation, which
// Run calls once the pod's apply has returned (the pod is stored then, and
// counts as the node's). An error is the node's, not a refusal.
type AdmitFunc func(pods []*corev1.Pod, allOrNothing bool) (results []admit.Result, releases []func(), err error)

// ApplyFunc stores a pod the batch admitted, without admitting it again,
// and runs one sync pass of it now, emitting its steps; it returns the
// pod's status and the steps after the pass (engine.Node's Apply).
type ApplyFunc func(ctx context.Context, pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret,
	emit func(syncer.StepResult)) (corev1.PodStatus, []syncer.StepResult, error)

// WaitFor is the target a pod is waited for.
type WaitFor int

const (
	// Running: every regular container is running (the kubelet's rule).
	Running WaitFor = iota
	// Ready: the pod's Ready condition is True.
	Ready
	// Succeeded: the pod's phase is Succeeded.
	Succeeded
)

func (w WaitFor) String() string {
	return [...]string{"Running", "Ready", "Succeeded"}[w]
}

// Outcome is how one pod's run ended.
type Outcome int

const (
	// ReachedTarget: the pod reached its WaitFor.
	ReachedTarget Outcome = iota + 1
	// Rejected: admission refused the pod, or ALL_OR_NOTHING refused the
	// batch; nothing of it was created.
	Rejected
	// Failed: the pod can no longer reach its target (terminal phase, its
	// apply failed, or a pass failed with a sync error that will not clear
	// by itself: see the package documentation).
	Failed
	// TimedOut: the pod's timeout expired first; the pod is left as it is.
	TimedOut
)

func (o Outcome) String() string {
	switch o {
	case ReachedTarget:
		return "ReachedTarget"
	case Rejected:
		return "Rejected"
	case Failed:
		return "Failed"
	case TimedOut:
		return "TimedOut"
	}
	return "Unknown"
}

// Failure reasons of a Result beside admission's.
const (
	ReasonDeadlineExceeded = "DeadlineExceeded"
	ReasonPodFailed        = "PodFailed"
	ReasonPodCompleted     = "PodCompleted"
	ReasonSyncError        = "SyncError"
	// ReasonPreconditionFailed rejects a pod whose precondition or whose
	// call's lease epoch does not hold; nothing of it was stored.
	ReasonPreconditionFailed = "PreconditionFailed"
	// ReasonCrashLoopBackOff: a container exited and waits out its
	// restart back-off before the pod reached Running or Ready.
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
)

// DefaultTimeout is a pod's timeout when the request gives none.
const DefaultTimeout = 5 * time.Minute

// Log tail limits of a failed container.
const (
	logTailLines = 20
	logTailBytes = 4 << 10
)

// Request is a batch of pods to run. Pods must be defaulted and valid.
type Request struct {
	Pods       []*corev1.Pod
	ConfigMaps []*corev1.ConfigMap
	Secrets    []*corev1.Secret
	WaitFor    WaitFor
	// Timeout per pod, from its admission; 0 means DefaultTimeout.
	Timeout time.Duration
	// AllOrNothing runs no pod when any is rejected.
	AllOrNothing bool
	// Preconditions are the preconditions of the pods' writes, by pod
	// UID; a pod whose precondition fails is Rejected with reason
	// ReasonPreconditionFailed, and nothing of it is stored.
	Preconditions map[types.UID]store.Precondition
	// MinReady is how long, for Running, each regular container without a
	// readiness probe must have run since its last start (one with a
	// readiness probe: until it is ready); 0: running is enough.
	MinReady time.Duration
}

// Options configure Run.
type Options struct {
	// Pods are the node's pods and revision log. Required.
	Pods Pods
	// Admit admits the batch, once. Required.
	Admit AdmitFunc
	// Apply runs an admitted pod. Required.
	Apply ApplyFunc
	// PodLogDir is where the runtime writes container logs (engine
	// Options.PodLogDir); empty means the engine's default.
	PodLogDir string
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// Progress is one thing that happened during a run: a sync step of a pod,
// or a pod's new status.
type Progress struct {
	Pod    store.PodRef
	Step   *syncer.StepResult
	Status *corev1.PodStatus
}

// FailedContainer describes a container that made a pod fail.
type FailedContainer struct {
	Name          string
	ContainerType syncer.ContainerType
	// ExitCode of its last termination, if it terminated.
	ExitCode     *int32
	Reason       string
	Message      string
	RestartCount int32
	// LogTail holds the last lines of its output.
	LogTail []string
}

// Result is the verdict for one pod.
type Result struct {
	Pod              store.PodRef
	Admitted         bool
	Outcome          Outcome
	Reason           string
	Message          string
	FailedContainers []FailedContainer
	Status           corev1.PodStatus
	Duration         time.Duration
}

// Summary is the verdict for the batch: one result per pod, in request
// order, and counts.
type Summary struct {
	Results                                   []Result
	ReachedTarget, Rejected, Failed, TimedOut int
}

// Run admits, applies and waits for the pods of req, calling progress (if
// not nil, from several goroutines, serialised) as things happen. It
// returns when every admitted pod has a verdict, or with ctx's error when
// the caller goes away — the pods keep running either way. If the apply of
// a pod fails with an error wrapping errdefs.ErrRuntimeUnavailable, the pod
// has not failed: Run stops waiting and returns that error at once; the
// pods applied stay stored, converge once the runtime is back, and a run
// of the same batch picks them up.
func Run(ctx context.Context, opts Options, req Request, progress func(Progress)) (Summary, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if req.Timeout <= 0 {
		req.Timeout = DefaultTimeout
	}
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	r := &run{opts: opts, req: req, waiters: map[types.UID]*waiter{}, abort: abort}
	r.progress = func(p Progress) {
		if progress == nil {
			return
		}
		r.progressMu.Lock()
		defer r.progressMu.Unlock()
		progress(p)
	}
	return r.run(ctx)
}

type run struct {
	opts       Options
	req        Request
	progressMu sync.Mutex
	progress   func(Progress)
	waiters    map[types.UID]*waiter // fixed before the dispatcher starts
	// abort ends the run with its cause (the runtime is unavailable).
	abort context.CancelCauseFunc
}

// waiter is a pod's mailbox for its latest status.
type waiter struct {
	mu     sync.Mutex
	latest *corev1.PodStatus
	notify chan struct{} // capacity 1
}

func (w *waiter) put(st *corev1.PodStatus) {
	w.mu.Lock()
	w.latest = st
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *waiter) take() *corev1.PodStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.latest
	w.latest = nil
	return st
}

func (r *run) run(ctx context.Context) (Summary, error) {
	// The revision to watch from, before anything of the batch is
	// stored: the watch misses none of its statuses.
	_, rev, err := r.opts.Pods.ListShared(ctx, store.Filter{})
	if err != nil {
		return Summary{}, fmt.Errorf("list pods: %w", err)
	}
	decisions, releases, err := r.opts.Admit(r.req.Pods, r.req.AllOrNothing)
	if err != nil {
		return Summary{}, err
	}
	failpoint.Inject(failpoint.RunPodsAdmitted)

	results := make([]Result, len(r.req.Pods))
	for i, pod := range r.req.Pods {
		results[i] = Result{Pod: store.RefOf(pod), Admitted: decisions[i].Admit}
		if !decisions[i].Admit {
			results[i].Outcome, results[i].Reason, results[i].Message = Rejected, decisions[i].Reason, decisions[i].Message
			continue
		}
		r.waiters[pod.UID] = &waiter{notify: make(chan struct{}, 1)}
	}

	if len(r.waiters) > 0 {
		wctx, stopWatch := context.WithCancel(ctx)
		watchDone := make(chan struct{})
		go func() {
			defer close(watchDone)
			r.dispatch(wctx, rev)
		}()
		var wg sync.WaitGroup
		for i, pod := range r.req.Pods {
			if !decisions[i].Admit {
				continue
			}
			wg.Go(func() { results[i] = r.runPod(ctx, pod, releases[i]) })
		}
		wg.Wait()
		stopWatch()
		<-watchDone
	}
	if ctx.Err() != nil {
		return Summary{}, context.Cause(ctx)
	}

	s := Summary{Results: results}
	for _, res := range results {
		switch res.Outcome {
		case ReachedTarget:
			s.ReachedTarget++
		case Rejected:
			s.Rejected++
		case Failed:
			s.Failed++
		case TimedOut:
			s.TimedOut++
		}
	}
	return s, nil
}

// dispatch follows the revision log from rev and hands each batch pod's
// status changes to its waiter. A watch that ends early (slow consumer,
// compaction) is resumed from a fresh list, whose statuses are handed out
// too, so no pod misses its latest status.
func (r *run) dispatch(ctx context.Context, rev int64) {
	for ctx.Err() == nil {
		w, err := r.opts.Pods.Watch(ctx, rev)
		if err == nil {
			for e := range w.Events() {
				rev = e.Revision
				if e.Kind != store.KindStatus || e.Status == nil {
					continue
				}
				if wt, ok := r.waiters[e.Pod.UID]; ok {
					st := e.Status.DeepCopy()
					r.progress(Progress{Pod: e.Pod, Status: st})
					wt.put(st)
				}
			}
			err = w.Err()
		}
		if ctx.Err() != nil {
			return
		}
		r.opts.Logger.Warn("run pods: watch ended, listing again", zap.Error(err), zap.Int64("revision", rev))
		records, listRev, lerr := r.opts.Pods.ListShared(ctx, store.Filter{})
		if lerr != nil {
			// The store is closing or broken: wait a little and retry
			// rather than spin; ctx ends the loop.
			select {
			case <-ctx.Done():
			case <-r.opts.Clock.After(100 * time.Millisecond):
			}
			continue
		}
		for _, rec := range records {
			if wt, ok := r.waiters[rec.Pod.UID]; ok {
				wt.put(rec.Pod.Status.DeepCopy())
			}
		}
		rev = listRev
	}
}

// runPod applies one admitted pod and waits for its verdict.
func (r *run) runPod(ctx context.Context, pod *corev1.Pod, release func()) Result {
	start := r.opts.Clock.Now()
	ref := store.RefOf(pod)
	res := Result{Pod: ref, Admitted: true}
	finish := func(o Outcome, reason, msg string, st corev1.PodStatus) Result {
		res.Outcome, res.Reason, res.Message, res.Status = o, reason, msg, st
		res.Duration = r.opts.Clock.Since(start)
		if o == Failed || o == TimedOut {
			res.FailedContainers = r.failedContainers(ctx, pod, &st)
		}
		return res
	}
	pctx, cancel := context.WithTimeout(ctx, r.req.Timeout)
	defer cancel()
	wt := r.waiters[pod.UID]

	// The steps of the worker's later passes (the next init container, a
	// restart) are reported too, until the verdict. The worker must not
	// wait for the caller: they queue.
	// A sync error that will not clear by itself (terminalFailure) in a
	// later pass ends the wait at once.
	syncFailed := make(chan syncer.StepResult, 1)
	later := newStepQueue(func(s syncer.StepResult) { r.progress(Progress{Pod: ref, Step: &s}) })
	stopObserving := r.opts.Pods.ObserveSteps(pod.UID, func(s syncer.StepResult) {
		later.push(s)
		if terminalFailure(pod, s) {
			select {
			case syncFailed <- s:
			default:
			}
		}
	})
	defer later.close()
	defer stopObserving()
	st, steps, err := r.opts.Apply(pctx, pod, r.req.ConfigMaps, r.req.Secrets, func(s syncer.StepResult) {
		r.progress(Progress{Pod: ref, Step: &s})
	})
	// Stored (or refused by the store): its admission's reservation ends.
	release()
	timedOut := func(st corev1.PodStatus) Result {
		return finish(TimedOut, ReasonDeadlineExceeded, r.timeoutMessage(ctx, pod, &st), st)
	}
	switch {
	case ctx.Err() != nil:
		return res
	case pctx.Err() != nil:
		// The pod's own deadline ended during its pass: a step the
		// deadline cut short (a sandbox's create, a pull) failed for
		// that, not for a fault of the pod's.
		if done, outcome, reason, msg, _ := verdict(pod, &st, r.req.WaitFor, r.opts.Clock.Now(), r.req.MinReady); done && err == nil {
			return finish(outcome, reason, msg, st)
		}
		return timedOut(st)
	case errors.Is(err, errdefs.ErrRuntimeUnavailable):
		r.abort(err)
		return res
	case errors.Is(err, errdefs.ErrPreconditionFailed), errors.Is(err, errdefs.ErrLeaseSuperseded), errors.Is(err, errdefs.ErrLeaseRequired):
		res = finish(Rejected, ReasonPreconditionFailed, err.Error(), st)
		res.Admitted = false
		return res
	case err != nil:
		return finish(Failed, ReasonSyncError, err.Error(), st)
	}
	for _, s := range steps {
		if terminalFailure(pod, s) {
			return finish(Failed, ReasonSyncError, syncErrorMessage(pod, s), st)
		}
	}
	for {
		done, outcome, reason, msg, recheck := verdict(pod, &st, r.req.WaitFor, r.opts.Clock.Now(), r.req.MinReady)
		if done {
			return finish(outcome, reason, msg, st)
		}
		// A container settling (MinReady) is looked at again when it
		// has run long enough, if no status comes first.
		var settled <-chan time.Time
		if recheck > 0 {
			settled = r.opts.Clock.After(recheck)
		}
		select {
		case <-ctx.Done():
			return res
		case <-settled:
		case <-pctx.Done():
			return timedOut(st)
		case s := <-syncFailed:
			if latest := wt.take(); latest != nil {
				st = *latest
			}
			if pctx.Err() != nil {
				// The deadline came first: a pass after it may fail
				// for what the deadline cut short before it.
				return finish(TimedOut, ReasonDeadlineExceeded, fmt.Sprintf("pod did not reach %s within %s", r.req.WaitFor, r.req.Timeout), st)
			}
			return finish(Failed, ReasonSyncError, syncErrorMessage(pod, s), st)
		case <-wt.notify:
			if latest := wt.take(); latest != nil {
				st = *latest
			}
		}
	}
}

// stepQueue hands steps to deliver in order on its own goroutine, so the
// worker that pushes them never waits for a slow caller.
type stepQueue struct {
	deliver func(syncer.StepResult)
	mu      sync.Mutex
	steps   []syncer.StepResult
	closed  bool
	wake    chan struct{}
	done    chan struct{}
}

func newStepQueue(deliver func(syncer.StepResult)) *stepQueue {
	q := &stepQueue{deliver: deliver, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.loop()
	return q
}

func (q *stepQueue) push(s syncer.StepResult) {
	q.mu.Lock()
	if !q.closed {
		q.steps = append(q.steps, s)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close delivers what is queued and stops the queue.
func (q *stepQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}

func (q *stepQueue) loop() {
	defer close(q.done)
	for range q.wake {
		q.mu.Lock()
		steps, closed := q.steps, q.closed
		q.steps = nil
		q.mu.Unlock()
		for _, s := range steps {
			q.deliver(s)
		}
		if closed {
			return
		}
	}
}
