package podworkers

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/watch"
	"github.com/podsync/podsync/logx"
)

// Retry delays of passes that failed (a step without a back-off of its
// own, or the pass itself): minRetryDelay doubling per failed pass, at
// most the back-off cap.
const minRetryDelay = time.Second

// worker is the logical worker of one pod UID: a per-UID lock held for one
// pass (never across waits), a loop that runs a pass whenever it is kicked
// or its retry timer fires, and what passes remember between them.
//
// A worker holds no pointer to the Workers it belongs to: what its passes
// need (the store, the syncer, the prober, the clock, the logger) is the
// Workers', whose methods take the worker (the kubelet's podWorkers and
// their per-pod podSyncStatus).
type worker struct {
	uid types.UID
	// lock is a one-slot semaphore, so waiting for it honours a context.
	lock    chan struct{}
	kick    chan struct{}
	resched chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc

	// Guarded by lock.
	// state is where the pod is in its life on the node; retired is set
	// when it is removed.
	state    lifecycle
	retired  bool
	failures int
	// reasons is the kubelet's ReasonCache: the waiting reason of each
	// container whose last start failed.
	reasons map[string]corev1.ContainerStateWaiting
	// backoffs is each backed-off container's next retry at its last
	// BackOff event, so a wait is reported once.
	backoffs map[string]time.Time
	// generation is the generation of the pod record of the pass under
	// way, or of the last one: its statuses' observedGeneration.
	generation int64

	// deleters counts the Delete callers waiting for or running a pass;
	// the loop leaves a deletion to them.
	deleters atomic.Int32

	mu sync.Mutex
	// stopPass cancels the sync pass running, if any (not a deletion).
	stopPass context.CancelCauseFunc
	retryAt  time.Time
	ref      store.PodRef
	hasRef   bool
	// summary is the pod's last status, for the metrics.
	summary podSummary
	// sandbox is the sandbox the pod's containers ran in after the last
	// pass; zero when it had none.
	sandbox model.Sandbox
	// pending gathers what asked for a pass since the last one began
	// (nil: nothing); seen is the pod's objects as the last pass found
	// them at its end, nil if it did not end cleanly. A pass asked for
	// only by hints seen already is skipped.
	pending *watch.Hint
	seen    watch.ObjectStates
	// seenMark is the read mark (watch.ReadMark) of the read behind
	// seen: hints' relist snapshots listed before it are older.
	seenMark uint64
	// pulls are the pod's failed image pulls, which the runtime does not
	// record: each pass starts from them and returns them updated.
	pulls []model.PullFailure
}

func newWorker(parent context.Context, uid types.UID) *worker {
	ctx, cancel := context.WithCancel(parent)
	return &worker{
		uid: uid, lock: make(chan struct{}, 1), kick: make(chan struct{}, 1), resched: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel,
		reasons: map[string]corev1.ContainerStateWaiting{}, backoffs: map[string]time.Time{},
	}
}

func (w *worker) acquire(ctx context.Context) error {
	select {
	case w.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (w *worker) release() { <-w.lock }

// kickSelf asks the worker's loop for a pass; kicks made while one is
// pending coalesce.
func (w *worker) kickSelf() {
	w.hint(watch.Hint{UID: w.uid, Unknown: true})
}

// hint asks the worker's loop for a pass for what h reports; the loop
// skips it if the last pass saw all of it. h's events become the
// worker's: a subscription hands over the hints it delivers.
func (w *worker) hint(h watch.Hint) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending == nil {
		w.pending = &h
	} else {
		w.pending.Merge(h)
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// passStarts forgets what asked for a pass: the pass starting reads the
// store and the runtime after all of it.
func (w *worker) passStarts() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.kick:
	default:
	}
	w.pending, w.seen, w.seenMark = nil, nil, 0
}

// hintsSeen reports whether the last pass saw everything that asked for a
// pass since it began, and forgets it; sources are the runtime watcher's
// sources among what asked.
func (w *worker) hintsSeen() (seen bool, sources watch.Source) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pending
	w.pending = nil
	if p == nil {
		return true, 0
	}
	return p.SeenBy(w.seen, w.seenMark), p.Sources()
}

// passSaw records the objects the pass that ends saw last; nil when the
// pass did not end cleanly.
func (w *worker) passSaw(states watch.ObjectStates, mark uint64) {
	w.mu.Lock()
	w.seen, w.seenMark = states, mark
	w.mu.Unlock()
}

func (w *worker) setRetry(at time.Time) {
	w.mu.Lock()
	w.retryAt = at
	w.mu.Unlock()
	select {
	case w.resched <- struct{}{}:
	default:
	}
}

func (w *worker) nextRetry() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.retryAt
}

func (w *worker) setRef(ref store.PodRef) {
	w.mu.Lock()
	w.ref, w.hasRef = ref, true
	w.mu.Unlock()
}

// noteSandbox remembers the sandbox a pass left the pod's containers in.
func (w *worker) noteSandbox(sb model.Sandbox) {
	w.mu.Lock()
	w.sandbox = sb
	w.mu.Unlock()
}

// lastSandbox returns the sandbox the pod's containers ran in after the
// last pass; zero when they had none.
func (w *worker) lastSandbox() model.Sandbox {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sandbox
}

// pullFailures returns the pod's failed image pulls as the last pass left
// them.
func (w *worker) pullFailures() []model.PullFailure {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pulls
}

// notePulls remembers the failed image pulls a pass returned.
func (w *worker) notePulls(fs []model.PullFailure) {
	w.mu.Lock()
	w.pulls = fs
	w.mu.Unlock()
}

func (w *worker) podRef() (store.PodRef, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ref, w.hasRef
}

// enter moves w's pod to state next, as the pass that found it there
// says. A move the lifecycle does not allow is logged, and made: the
// store and the runtime are the truth, the state only mirrors them. The
// caller holds w's lock.
func (p *Workers) enter(w *worker, next lifecycle) {
	if w.state == next {
		return
	}
	if !w.state.canEnter(next) {
		p.log.Warn("unexpected pod lifecycle move", zap.String(logx.PodUID, string(w.uid)),
			zap.Stringer(logx.PrevState, w.state), zap.Stringer(logx.State, next))
	} else {
		p.log.Debug("pod lifecycle", zap.String(logx.PodUID, string(w.uid)),
			zap.Stringer(logx.PrevState, w.state), zap.Stringer(logx.State, next))
	}
	w.state = next
}

// retire ends w: the pod is no longer held. The caller holds w's lock.
func (p *Workers) retire(w *worker) {
	w.retired = true
	w.cancel()
	p.mu.Lock()
	if p.workers[w.uid] == w {
		delete(p.workers, w.uid)
	}
	p.mu.Unlock()
	p.resizes.note(w.uid, false)
	p.retryPendingResizes(w.uid)
}

// run runs passes of w's pod when kicked or when its retry time comes,
// until w's context ends.
func (p *Workers) run(w *worker) {
	defer p.wg.Done()
	for {
		var (
			timer  clock.Timer
			timerC <-chan time.Time
		)
		if at := w.nextRetry(); !at.IsZero() {
			timer, timerC = p.timerUntil(at)
		}
		fire, due := false, false
		select {
		case <-w.ctx.Done():
		case <-w.resched:
		case <-w.kick:
			fire = true
		case <-timerC:
			fire, due = true, true
		}
		if timer != nil {
			timer.Stop()
		}
		if w.ctx.Err() != nil {
			return
		}
		if fire {
			p.loopPass(w, due)
		}
	}
}

// timerUntil returns a channel that receives once the clock reaches at,
// and the timer behind it (nil when at is due already). A timer is armed
// for a duration, at minus now: a clock that moved between reading now and
// arming (a stepped clock moves all at once) would leave it armed past at,
// so it is armed again until the clock held still meanwhile. On a real
// clock the few microseconds between are taken as they are.
func (p *Workers) timerUntil(at time.Time) (clock.Timer, <-chan time.Time) {
	for try := 0; ; try++ {
		now := p.clock.Now()
		d := at.Sub(now)
		if d <= 0 {
			// Due already (the clock passed it during the pass, or
			// before this loop came round): no timer, which on a clock
			// that only moves when stepped would wait for the next step.
			c := make(chan time.Time, 1)
			c <- at
			return nil, c
		}
		t := p.clock.NewTimer(d)
		if p.clock.Since(now) < time.Millisecond || try == 3 {
			return t, t.C()
		}
		t.Stop()
	}
}

// loopPass runs one pass in w's turn: always when due is set (a retry
// time came), else unless the last pass saw what asked for this one.
func (p *Workers) loopPass(w *worker, due bool) {
	if err := w.acquire(w.ctx); err != nil {
		return
	}
	defer w.release()
	if w.retired {
		return
	}
	// Checked in the pod's turn: a pass that ran meanwhile (an Apply's)
	// may have seen the change.
	seen, sources := w.hintsSeen()
	if seen && !due {
		p.metrics.ObserveSkippedPass()
		return
	}
	if !seen && sources != 0 {
		p.metrics.ObserveHintPass(sources)
		p.log.Debug("runtime hint wakes pod worker", zap.String(logx.PodUID, string(w.uid)),
			zap.Stringer(logx.HintSource, sources))
	}
	if _, err := p.pass(w.ctx, w, true, nil); err != nil && w.ctx.Err() == nil {
		p.log.Warn("pod sync failed; retrying", zap.String(logx.PodUID, string(w.uid)), zap.Error(err),
			zap.Time(logx.NextRetry, w.nextRetry()))
	}
}

// failureRetry returns when to retry after a failed pass of w's pod,
// doubling the delay with each failure in a row.
func (p *Workers) failureRetry(w *worker) time.Time {
	d := minRetryDelay
	for i := 0; i < w.failures && d < p.backoff.MaxDelay(); i++ {
		d *= 2
	}
	w.failures++
	return p.clock.Now().Add(min(d, p.backoff.MaxDelay()))
}

// cancelPass cancels w's running sync pass, if any, with cause.
func (w *worker) cancelPass(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopPass != nil {
		w.stopPass(cause)
	}
}

// noteStatus records the pod's status for the metrics.
func (w *worker) noteStatus(status *corev1.PodStatus) {
	s := podSummaryOf(status)
	w.mu.Lock()
	w.summary = s
	w.mu.Unlock()
}
