package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/prober"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/watch"
	"github.com/podsync/podsync/internal/failpoint"
	"github.com/podsync/podsync/logx"
)

// Retry delays of passes that failed (a step without a back-off of its
// own, or the pass itself): minRetryDelay doubling per failed pass, at
// most the back-off cap.
const minRetryDelay = time.Second

// worker is the logical worker of one pod UID: a per-UID lock held for one
// pass (never across waits), a loop that runs a pass whenever it is kicked
// or its retry timer fires, and what passes remember between them.
type worker struct {
	uid types.UID
	// lock is a one-slot semaphore, so waiting for it honours a context.
	lock    chan struct{}
	kick    chan struct{}
	resched chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc

	// Guarded by lock.
	retired  bool
	failures int
	// reasons is the kubelet's ReasonCache: the waiting reason of each
	// container whose last start failed.
	reasons map[string]corev1.ContainerStateWaiting
	// backoffs is each backed-off container's next retry at its last
	// BackOff event, so a wait is reported once.
	backoffs map[string]time.Time

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
	sandbox plan.Sandbox
	// pending gathers what asked for a pass since the last one began
	// (nil: nothing); seen is the pod's objects as the last pass found
	// them at its end, nil if it did not end cleanly. A pass asked for
	// only by hints seen already is skipped.
	pending *watch.Hint
	seen    watch.ObjectStates
	// pulls are the pod's failed image pulls, which the runtime does not
	// record: each pass starts from them and returns them updated.
	pulls []plan.PullFailure
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
	w.pending, w.seen = nil, nil
}

// hintsSeen reports whether the last pass saw everything that asked for a
// pass since it began, and forgets it.
func (w *worker) hintsSeen() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pending
	w.pending = nil
	return p == nil || p.SeenBy(w.seen)
}

// passSaw records the objects the pass that ends saw last; nil when the
// pass did not end cleanly.
func (w *worker) passSaw(states watch.ObjectStates) {
	w.mu.Lock()
	w.seen = states
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
func (w *worker) noteSandbox(sb plan.Sandbox) {
	w.mu.Lock()
	w.sandbox = sb
	w.mu.Unlock()
}

// lastSandbox returns the sandbox the pod's containers ran in after the
// last pass; zero when they had none.
func (w *worker) lastSandbox() plan.Sandbox {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sandbox
}

// sandboxIn returns the sandbox of view with id; zero when there is none.
func sandboxIn(view plan.RuntimeView, id string) plan.Sandbox {
	for _, s := range view.Sandboxes {
		if s.ID == id {
			return s
		}
	}
	return plan.Sandbox{}
}

// storedSandbox names sb as the store records it with a status.
func storedSandbox(sb plan.Sandbox) store.SandboxRef {
	return store.SandboxRef{ID: sb.ID, Attempt: sb.Attempt}
}

// pullFailures returns the pod's failed image pulls as the last pass left
// them.
func (w *worker) pullFailures() []plan.PullFailure {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pulls
}

// notePulls remembers the failed image pulls a pass returned.
func (w *worker) notePulls(fs []plan.PullFailure) {
	w.mu.Lock()
	w.pulls = fs
	w.mu.Unlock()
}

func (w *worker) podRef() (store.PodRef, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ref, w.hasRef
}

// PodSandbox returns the sandbox the pod with uid ran its containers in
// after its last pass: its CRI id and attempt. ok is false if no pass has
// given the pod a sandbox since podsyncd started (or since it lost it).
func (n *Node) PodSandbox(uid types.UID) (id string, attempt uint32, ok bool) {
	n.mu.Lock()
	w := n.workers[uid]
	n.mu.Unlock()
	if w == nil {
		return "", 0, false
	}
	sb := w.lastSandbox()
	return sb.ID, sb.Attempt, sb.ID != ""
}

// workerFor returns the worker of uid, creating it (and starting its loop
// once Run has recovered) if there is none.
func (n *Node) workerFor(uid types.UID) *worker {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w := n.workers[uid]; w != nil {
		return w
	}
	parent := n.runCtx
	if parent == nil {
		parent = context.Background()
	}
	w := newWorker(parent, uid)
	n.workers[uid] = w
	if n.loopsOn {
		n.startLoopLocked(w)
	}
	return w
}

// lockWorker returns the worker of uid with its lock held, waiting while
// ctx allows.
func (n *Node) lockWorker(ctx context.Context, uid types.UID) (*worker, error) {
	for {
		w := n.workerFor(uid)
		if err := w.acquire(ctx); err != nil {
			return nil, err
		}
		if !w.retired {
			return w, nil
		}
		w.release()
	}
}

// startLoopLocked starts w's loop unless Run is ending; n.mu is held.
func (n *Node) startLoopLocked(w *worker) {
	if n.stopping {
		return
	}
	n.wg.Add(1)
	go n.loop(w)
}

// retire ends w: the pod is no longer held. The caller holds w's lock.
func (n *Node) retire(w *worker) {
	w.retired = true
	w.cancel()
	n.mu.Lock()
	if n.workers[w.uid] == w {
		delete(n.workers, w.uid)
	}
	n.mu.Unlock()
}

// loop runs passes of w's pod when kicked or when its retry time comes,
// until w's context ends.
func (n *Node) loop(w *worker) {
	defer n.wg.Done()
	for {
		var (
			timer  clock.Timer
			timerC <-chan time.Time
		)
		if at := w.nextRetry(); !at.IsZero() {
			timer = n.clock.NewTimer(max(at.Sub(n.clock.Now()), 0))
			timerC = timer.C()
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
			n.workerPass(w, due)
		}
	}
}

// workerPass runs one pass in w's turn: always when due is set (a retry
// time came), else unless the last pass saw what asked for this one.
func (n *Node) workerPass(w *worker, due bool) {
	if err := w.acquire(w.ctx); err != nil {
		return
	}
	defer w.release()
	if w.retired {
		return
	}
	// Checked in the pod's turn: a pass that ran meanwhile (an Apply's)
	// may have seen the change.
	if seen := w.hintsSeen(); seen && !due {
		n.metrics.observeSkippedPass()
		return
	}
	if _, err := n.pass(w.ctx, w, true, nil); err != nil && w.ctx.Err() == nil {
		n.log.Warn("pod sync failed; retrying", zap.String(logx.PodUID, string(w.uid)), zap.Error(err),
			zap.Time(logx.NextRetry, w.nextRetry()))
	}
}

// passOutcome is what a pass did.
type passOutcome struct {
	status corev1.PodStatus
	steps  []syncer.StepResult
	next   time.Time
	// gone is set when the store does not hold the pod.
	gone bool
}

// pass syncs w's pod once: the caller holds w's lock. It reads the desired
// pod from the store and
//
//   - for a pod the store does not hold, removes what the runtime holds
//     for it and retires the worker;
//   - for a pod marked deleting, finishes the deletion (a loop's pass
//     leaves it to a waiting Delete caller);
//   - for a terminal pod with nothing left running, does nothing;
//   - otherwise runs SyncPod, updates the prober, records the status if
//     it changed and the events of the steps, and sets the retry timer.
func (n *Node) pass(ctx context.Context, w *worker, byLoop bool, emit func(syncer.StepResult)) (passOutcome, error) {
	// What asked for a pass until now is served by this one, which reads
	// the store and the runtime after it.
	w.passStarts()
	if byLoop && emit == nil {
		emit = func(st syncer.StepResult) { n.observe(w.uid, st) }
	}
	rec, err := n.store.GetWithSecrets(w.uid)
	if errors.Is(err, store.ErrNotFound) {
		return passOutcome{gone: true}, n.removeUnstored(ctx, w)
	}
	if err != nil {
		w.setRetry(n.failureRetry(w))
		return passOutcome{}, fmt.Errorf("read pod uid %s from the store: %w", w.uid, err)
	}
	pod := rec.Pod
	w.setRef(store.RefOf(pod))
	w.noteStatus(&pod.Status)
	if rec.Deleting {
		if byLoop && w.deleters.Load() > 0 {
			// A Delete caller runs the deletion and reports its steps.
			return passOutcome{status: pod.Status}, nil
		}
		return n.finishDeletion(ctx, w, rec, emit)
	}
	if isTerminal(pod.Status.Phase) {
		if settled, err := n.terminalSettled(ctx, pod.UID); err == nil && settled {
			n.prober.RemovePod(pod.UID)
			w.setRetry(time.Time{})
			return passOutcome{status: pod.Status}, nil
		}
	}

	// A Delete cancels the pass instead of waiting for it.
	ctx, stop := context.WithCancelCause(ctx)
	w.mu.Lock()
	w.stopPass = stop
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.stopPass = nil
		w.mu.Unlock()
		stop(nil)
	}()
	in := syncer.SyncInput{ConfigMaps: rec.ConfigMaps, Secrets: rec.Secrets, Probes: n.probeResults(pod.UID),
		PullFailures: w.pullFailures()}
	in.Observed = func(view plan.RuntimeView, actions plan.PodActions) { n.publishObserved(w, pod, view, actions) }
	res, err := n.syncer.SyncPod(ctx, pod, in, emit)
	w.notePulls(res.PullFailures)
	out := passOutcome{steps: res.Steps, status: pod.Status}
	if err != nil {
		w.setRetry(n.failureRetry(w))
		return out, err
	}
	n.prober.Sync(pod, runningContainers(pod, res.View, n.cfg))
	now := n.clock.Now()
	n.noteStarts(w, res.Steps)
	status := podstatus.ComputePodStatus(pod, res.View, n.probeResults(pod.UID), now, n.statusOptions(w.reasons))
	ref := store.RefOf(pod)
	changes := n.stepEvents(w, pod, res.Steps)
	sb := sandboxIn(res.View, res.SandboxID)
	if !sameStatus(&pod.Status, &status) {
		c := store.StatusChange(ref, &status)
		c.Sandbox = storedSandbox(sb)
		changes = append(changes, c)
		if status.Phase != pod.Status.Phase {
			n.log.Info("pod phase changed", append(logx.Pod(pod), zap.String(logx.Phase, string(status.Phase)),
				zap.String(logx.PrevPhase, string(pod.Status.Phase)))...)
		}
	}
	failpoint.Inject(failpoint.BeforeStatusAppend)
	if len(changes) > 0 {
		if _, err := n.store.Append(changes...); err != nil {
			w.setRetry(n.failureRetry(w))
			return out, fmt.Errorf("record status of pod %s: %w", plan.PodString(pod), err)
		}
	}
	out.status = status
	w.noteStatus(&status)
	w.noteSandbox(sb)

	next := nextSync(pod, &status, res.Steps, now)
	switch {
	case res.Err() != nil:
		next = earliest(next, n.failureRetry(w))
	case isTerminal(status.Phase) && !isTerminal(pod.Status.Phase):
		// Kill what still runs of a pod that just ended.
		next = now
	default:
		w.failures = 0
		// Hints of what this pass saw at its end may skip their pass
		// only if a pass over that view would do nothing: it may show
		// more than the pass planned from (an init container that
		// exited meanwhile). A pass with a failed step keeps its retry
		// delay, and hints after it run passes.
		if settled(plan.ComputePodActions(pod, res.View, n.probeResults(pod.UID), now, n.backoff)) {
			w.passSaw(watch.StatesOf(res.View))
		}
	}
	w.setRetry(next)
	out.next = next
	return out, nil
}

// settled reports whether a plan kills, creates and starts nothing:
// starts that wait in a back-off have the worker's retry timer.
func settled(plan plan.PodActions) bool {
	return !plan.KillPod && !plan.Sandbox.Create && len(plan.Sandbox.KillIDs) == 0 &&
		len(plan.Kill) == 0 && len(plan.StartInit) == 0 && len(plan.Start) == 0
}

// failureRetry returns when to retry after a failed pass, doubling the
// delay with each failure in a row.
func (n *Node) failureRetry(w *worker) time.Time {
	d := minRetryDelay
	for i := 0; i < w.failures && d < n.backoff.MaxDelay(); i++ {
		d *= 2
	}
	w.failures++
	return n.clock.Now().Add(min(d, n.backoff.MaxDelay()))
}

// nextSync returns when a pass must run without a change: the earliest
// end of a back-off, or the pod's active deadline.
func nextSync(pod *corev1.Pod, status *corev1.PodStatus, steps []syncer.StepResult, now time.Time) time.Time {
	var next time.Time
	for _, s := range steps {
		if !s.NextRetry.IsZero() {
			next = earliest(next, s.NextRetry)
		}
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && status.StartTime != nil && !isTerminal(status.Phase) {
		next = earliest(next, status.StartTime.Add(time.Duration(*d)*time.Second))
	}
	if !next.IsZero() && !next.After(now) {
		next = now.Add(10 * time.Millisecond)
	}
	return next
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// sameStatus compares statuses as the store does: by their JSON, in which
// times have a resolution of one second.
func sameStatus(a, b *corev1.PodStatus) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// terminalSettled reports whether nothing of the pod runs any more: no
// running container and no ready sandbox.
func (n *Node) terminalSettled(ctx context.Context, uid types.UID) (bool, error) {
	view, err := n.syncer.ReadView(ctx, uid)
	if err != nil {
		return false, err
	}
	if slices.ContainsFunc(view.Containers, func(c plan.ContainerInstance) bool { return c.State == plan.ContainerRunning }) {
		return false, nil
	}
	return !slices.ContainsFunc(view.Sandboxes, func(s plan.Sandbox) bool { return s.State == plan.SandboxReady }), nil
}

// runningContainers lists the newest running instance of each container
// for the prober.
func runningContainers(pod *corev1.Pod, view plan.RuntimeView, cfg criconfig.Options) []prober.RunningContainer {
	var ip string
	switch {
	case pod.Spec.HostNetwork && len(cfg.NodeIPs) > 0:
		ip = cfg.NodeIPs[0]
	case len(view.Sandboxes) > 0 && view.Sandboxes[0].State == plan.SandboxReady && len(view.Sandboxes[0].IPs) > 0:
		ip = view.Sandboxes[0].IPs[0]
	}
	seen := map[string]bool{}
	var out []prober.RunningContainer
	for _, c := range view.Containers {
		if seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		if c.State == plan.ContainerRunning {
			out = append(out, prober.RunningContainer{Name: c.Name, ID: c.ID, StartedAt: c.StartedAt, PodIP: ip})
		}
	}
	return out
}

// finishDeletion kills a pod marked deleting within its grace period,
// removes everything the runtime and the node hold for it, and removes it
// from the store. The caller holds w's lock.
func (n *Node) finishDeletion(ctx context.Context, w *worker, rec *store.PodRecord, emit func(syncer.StepResult)) (passOutcome, error) {
	pod := rec.Pod
	res, err := n.syncer.SyncPod(ctx, pod, syncer.SyncInput{ConfigMaps: rec.ConfigMaps, Secrets: rec.Secrets,
		PullFailures: w.pullFailures()}, emit)
	w.notePulls(res.PullFailures)
	out := passOutcome{steps: res.Steps, status: pod.Status}
	if err != nil {
		w.setRetry(n.failureRetry(w))
		return out, fmt.Errorf("kill pod: %w", err)
	}
	if changes := n.stepEvents(w, pod, res.Steps); len(changes) > 0 {
		if _, err := n.store.Append(changes...); err != nil && !errors.Is(err, store.ErrNotFound) {
			n.log.Warn("record events", append(logx.Pod(pod), zap.Error(err))...)
		}
	}
	n.prober.RemovePod(pod.UID)
	if err := n.removePod(ctx, pod); err != nil {
		w.setRetry(n.failureRetry(w))
		return out, err
	}
	failpoint.Inject(failpoint.BeforeStoreDelete)
	rev, err := n.store.Delete(pod.UID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		w.setRetry(n.failureRetry(w))
		return out, fmt.Errorf("remove pod from the store: %w", err)
	}
	n.retire(w)
	n.log.Info("pod deleted", append(logx.Pod(pod), zap.Int64(logx.Revision, rev))...)
	out.gone = true
	return out, nil
}

// removeUnstored removes what the runtime holds for a pod the store does
// not hold and retires its worker. The caller holds w's lock.
func (n *Node) removeUnstored(ctx context.Context, w *worker) error {
	n.prober.RemovePod(w.uid)
	ref, found, err := n.runtimePodRef(ctx, w.uid)
	if err != nil {
		w.setRetry(n.failureRetry(w))
		return fmt.Errorf("list runtime objects of pod uid %s: %w", w.uid, err)
	}
	if found {
		if err := n.removeOrphan(ctx, ref); err != nil {
			w.setRetry(n.failureRetry(w))
			return err
		}
	}
	n.retire(w)
	return nil
}

func (n *Node) removeOrphan(ctx context.Context, ref plan.PodRef) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}}
	if err := n.removePod(ctx, pod); err != nil {
		return err
	}
	n.log.Info("orphaned pod removed", logx.Pod(pod)...)
	return nil
}

// removeAttempts bounds the attempts of removePod.
const removeAttempts = 8

// removePod removes everything of pod, retrying for a while: a runtime
// refuses to remove a container a cancelled start has not let go of yet
// (containerd 1.6 keeps it "starting" for seconds).
func (n *Node) removePod(ctx context.Context, pod *corev1.Pod) error {
	delay := 100 * time.Millisecond
	for i := 1; ; i++ {
		err := n.syncer.RemovePod(ctx, pod)
		if err == nil || i == removeAttempts || ctx.Err() != nil {
			return err
		}
		n.log.Warn("remove pod; retrying", append(logx.Pod(pod), zap.Error(err), zap.Duration(logx.Duration, delay))...)
		select {
		case <-ctx.Done():
			return err
		case <-n.clock.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// cancelPass cancels w's running sync pass, if any, with cause.
func (w *worker) cancelPass(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopPass != nil {
		w.stopPass(cause)
	}
}

// publishObserved records the status of what a pass found before it acts
// when the pass is about to restart a container that exited: watchers see
// the exit (state terminated, the exit code) at once rather than after
// the restart's CreateContainer and StartContainer, and the status they
// see next has the new instance. Other passes publish only their result.
// pod.Status becomes the published status. The caller holds w's lock.
func (n *Node) publishObserved(w *worker, pod *corev1.Pod, view plan.RuntimeView, plan plan.PodActions) {
	if !restartsExited(view, plan) {
		return
	}
	status := podstatus.ComputePodStatus(pod, view, n.probeResults(pod.UID), n.clock.Now(), n.statusOptions(w.reasons))
	if sameStatus(&pod.Status, &status) {
		return
	}
	// The sandbox the containers ran in: the one the plan keeps, else
	// the last pass's.
	sb := w.lastSandbox()
	if kept := sandboxIn(view, plan.Sandbox.ID); !plan.Sandbox.Create && kept.ID != "" {
		sb = kept
	}
	c := store.StatusChange(store.RefOf(pod), &status)
	c.Sandbox = storedSandbox(sb)
	if _, err := n.store.Append(c); err != nil {
		// The pass's own status follows; this one is only earlier.
		n.log.Warn("record observed status", append(logx.Pod(pod), zap.Error(err))...)
		return
	}
	pod.Status = status
	w.noteStatus(&status)
}

// restartsExited reports whether plan starts again a container whose
// latest instance in view has exited.
func restartsExited(view plan.RuntimeView, actions plan.PodActions) bool {
	for _, list := range [][]plan.ContainerAction{actions.Start, actions.StartInit} {
		for _, a := range list {
			if inst := view.FindContainer(a.Name); inst != nil && inst.State == plan.ContainerExited {
				return true
			}
		}
	}
	return false
}
