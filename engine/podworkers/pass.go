package podworkers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/prober"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/watch"
	"github.com/podsync/podsync/logx"
)

// sandboxIn returns the sandbox of view with id; zero when there is none.
func sandboxIn(view model.RuntimeView, id string) model.Sandbox {
	for _, s := range view.Sandboxes {
		if s.ID == id {
			return s
		}
	}
	return model.Sandbox{}
}

// storedSandbox names sb as the store records it with a status.
func storedSandbox(sb model.Sandbox) store.SandboxRef {
	return store.SandboxRef{ID: sb.ID, Attempt: sb.Attempt}
}

// passOutcome is what a pass did.
type passOutcome struct {
	status corev1.PodStatus
	steps  []syncer.StepResult
	next   time.Time
	// gone is set when the store does not hold the pod.
	gone bool
}

// pass runs one pass of w's pod: the caller holds w's lock. It finds the
// state the stored pod is in and runs that state's pass:
//
//   - removed (the store does not hold the pod): remove what the runtime
//     holds for it and retire the worker;
//   - terminating (marked deleting): finish the deletion (a loop's pass
//     leaves it to a waiting Delete caller);
//   - terminated (a terminal pod with nothing left running): nothing;
//   - syncing: run SyncPod, update the prober, record the status if it
//     changed and the events of the steps, and set the retry timer.
func (p *Workers) pass(ctx context.Context, w *worker, byLoop bool, emit func(syncer.StepResult)) (passOutcome, error) {
	// What asked for a pass until now is served by this one, which reads
	// the store and the runtime after it.
	w.passStarts()
	if byLoop && emit == nil {
		emit = func(st syncer.StepResult) { p.observe(w.uid, st) }
	}
	rec, err := p.store.GetWithSecrets(w.uid)
	if errors.Is(err, errdefs.ErrPodNotFound) {
		p.enter(w, removed)
		return passOutcome{gone: true}, p.remove(ctx, w)
	}
	if err != nil {
		w.setRetry(p.failureRetry(w))
		return passOutcome{}, fmt.Errorf("read pod uid %s from the store: %w", w.uid, err)
	}
	pod := rec.Pod
	w.setRef(store.RefOf(pod))
	w.noteStatus(&pod.Status)
	if rec.Deleting {
		p.enter(w, terminating)
		if byLoop && w.deleters.Load() > 0 {
			// A Delete caller runs the deletion and reports its steps.
			return passOutcome{status: pod.Status}, nil
		}
		return p.terminate(ctx, w, rec, emit)
	}
	if model.IsTerminal(pod.Status.Phase) {
		if settled, err := p.terminalSettled(ctx, pod.UID); err == nil && settled {
			p.enter(w, terminated)
			p.prober.RemovePod(pod.UID)
			p.tearDownEvicted(ctx, pod)
			w.setRetry(time.Time{})
			return passOutcome{status: pod.Status}, nil
		}
	}
	p.enter(w, syncing)
	return p.sync(ctx, w, rec, emit)
}

// sync is the pass of a syncing pod: one SyncPod, then the prober, the
// status, the events and the next retry. The caller holds w's lock.
func (p *Workers) sync(ctx context.Context, w *worker, rec *store.PodRecord, emit func(syncer.StepResult)) (passOutcome, error) {
	pod := rec.Pod
	w.generation = rec.Generation
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
	cms, secrets, err := p.podObjects(rec)
	if err != nil {
		w.setRetry(p.failureRetry(w))
		return passOutcome{status: pod.Status}, err
	}
	in := syncer.SyncInput{ConfigMaps: cms, Secrets: secrets, Probes: p.prober.Results(pod.UID),
		PullFailures: w.pullFailures(), AdmitResize: p.admitResize, NothingInRuntime: p.claimNew(pod.UID),
		ReadMark: watch.ReadMark}
	in.Observed = func(view model.RuntimeView, actions plan.PodActions) { p.publishObserved(ctx, w, pod, view, actions) }
	res, err := p.syncer.SyncPod(ctx, pod, in, emit)
	if err == nil && ctx.Err() != nil {
		// A deletion interrupted the sandbox's create, which the syncer
		// does not count as failed (the kubelet's SyncPod returns): the
		// pass still yields to the deletion's, as every interrupted
		// pass does.
		err = fmt.Errorf("sync pod %s: %w", model.PodString(pod), context.Cause(ctx))
	}
	w.notePulls(res.PullFailures)
	p.noteResize(pod, res)
	out := passOutcome{steps: res.Steps, status: pod.Status}
	if err != nil {
		w.setRetry(p.failureRetry(w))
		return out, err
	}
	p.prober.Sync(pod, runningContainers(pod, res.View, p.cfg))
	now := p.clock.Now()
	status, err := p.record(ctx, w, pod, res, now)
	if err != nil {
		w.setRetry(p.failureRetry(w))
		return out, err
	}
	out.status = status
	out.next = p.scheduleNext(w, pod, &status, res, now)
	return out, nil
}

// record computes the status after a pass and appends it, if it changed,
// with the events of the pass's steps to the revision log. The caller
// holds w's lock.
func (p *Workers) record(ctx context.Context, w *worker, pod *corev1.Pod, res syncer.SyncResult, now time.Time) (corev1.PodStatus, error) {
	w.noteStarts(res.Steps)
	status := podstatus.ComputePodStatus(pod, res.View, p.prober.Results(pod.UID), now, p.passStatusOptions(w, res))
	changes := w.stepEvents(pod, res)
	sb := sandboxIn(res.View, res.SandboxID)
	if !store.SameStatus(&pod.Status, &status) {
		c := store.StatusChange(store.RefOf(pod), &status)
		c.Sandbox = storedSandbox(sb)
		changes = append(changes, c)
		if status.Phase != pod.Status.Phase {
			logx.From(ctx, p.log).Info("pod phase changed", append(logx.Pod(pod), zap.String(logx.Phase, string(status.Phase)),
				zap.String(logx.PrevPhase, string(pod.Status.Phase)))...)
		}
	}
	failpoint.Inject(failpoint.BeforeStatusAppend)
	if len(changes) > 0 {
		if _, err := p.store.Append(changes...); err != nil {
			return status, fmt.Errorf("record status of pod %s: %w", model.PodString(pod), err)
		}
	}
	w.noteStatus(&status)
	w.noteSandbox(sb)
	return status, nil
}

// scheduleNext sets and returns when the next pass must run without a
// change: at the end of a back-off or the active deadline, after the
// failure delay if a step failed, at once to kill what still runs of a
// pod that just ended. The caller holds w's lock.
func (p *Workers) scheduleNext(w *worker, pod *corev1.Pod, status *corev1.PodStatus, res syncer.SyncResult, now time.Time) time.Time {
	next := nextSync(pod, status, res.Steps, now)
	switch {
	case res.Err() != nil:
		next = earliest(next, p.failureRetry(w))
	case model.IsTerminal(status.Phase) && !model.IsTerminal(pod.Status.Phase):
		// Kill what still runs of a pod that just ended.
		next = now
	default:
		w.failures = 0
		// Hints of what this pass saw at its end may skip their pass
		// only if a pass over that view would do nothing: it may show
		// more than the pass planned from (an init container that
		// exited meanwhile, or a container that exited as the pass
		// ended and now waits in a back-off the pass did not report).
		// A pass with a failed step keeps its retry delay, and hints
		// after it run passes.
		final := plan.ComputePodActions(pod, res.View, p.prober.Results(pod.UID), now, p.backoff)
		if settled(final) && backOffsReported(final.BackOff, res.Steps) {
			w.passSaw(watch.StatesOf(res.View), res.ViewMark)
		}
	}
	w.setRetry(next)
	return next
}

// backOffsReported reports whether every back-off of a plan is among the
// back-off steps of a pass, which reported it (a BackOff event) and set
// the retry for its end.
func backOffsReported(backoffs []plan.ContainerAction, steps []syncer.StepResult) bool {
	for _, b := range backoffs {
		if !slices.ContainsFunc(steps, func(s syncer.StepResult) bool {
			return s.Action == syncer.ActionStartContainer && s.Target == b.Name && s.BackedOff()
		}) {
			return false
		}
	}
	return true
}

// settled reports whether a plan kills, creates, starts and removes nothing:
// starts that wait in a back-off have the worker's retry timer.
func settled(plan plan.PodActions) bool {
	return !plan.KillPod && !plan.Sandbox.Create && len(plan.Sandbox.KillIDs) == 0 &&
		len(plan.Kill) == 0 && len(plan.StartInit) == 0 && len(plan.Start) == 0 && len(plan.StartEphemeral) == 0 && len(plan.PruneInit) == 0
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
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && status.StartTime != nil && !model.IsTerminal(status.Phase) {
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

// runningContainers lists the newest running instance of each container
// for the prober.
func runningContainers(pod *corev1.Pod, view model.RuntimeView, cfg criconfig.Options) []prober.RunningContainer {
	var ip string
	switch {
	case pod.Spec.HostNetwork && len(cfg.NodeIPs) > 0:
		ip = cfg.NodeIPs[0]
	case len(view.Sandboxes) > 0 && view.Sandboxes[0].State == model.SandboxReady && len(view.Sandboxes[0].IPs) > 0:
		ip = view.Sandboxes[0].IPs[0]
	}
	seen := map[string]bool{}
	var out []prober.RunningContainer
	for _, c := range view.Containers {
		if seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		if c.State == model.ContainerRunning {
			out = append(out, prober.RunningContainer{Name: c.Name, ID: c.ID, StartedAt: c.StartedAt, PodIP: ip})
		}
	}
	return out
}

// finishDeletion kills a pod marked deleting within its grace period,
// removes everything the runtime and the node hold for it, and removes it
// from the store. The caller holds w's lock.
func (p *Workers) terminate(ctx context.Context, w *worker, rec *store.PodRecord, emit func(syncer.StepResult)) (passOutcome, error) {
	pod := rec.Pod
	w.generation = rec.Generation
	res, err := p.syncer.SyncPod(ctx, pod, syncer.SyncInput{ConfigMaps: rec.ConfigMaps, Secrets: rec.Secrets,
		PullFailures: w.pullFailures()}, emit)
	w.notePulls(res.PullFailures)
	out := passOutcome{steps: res.Steps, status: pod.Status}
	if err != nil {
		w.setRetry(p.failureRetry(w))
		return out, fmt.Errorf("kill pod: %w", err)
	}
	changes := w.stepEvents(pod, res)
	// The pod's last status, its containers terminated as the kill left
	// them (exit codes, reasons, finish times), as the kubelet reports a
	// deleted pod's before its API object goes: watchers and the caller
	// see how the containers ended, not a guess.
	final := podstatus.ComputePodStatus(pod, res.View, p.prober.Results(pod.UID), p.clock.Now(), p.passStatusOptions(w, res))
	if !store.SameStatus(&pod.Status, &final) {
		c := store.StatusChange(store.RefOf(pod), &final)
		c.Sandbox = storedSandbox(sandboxIn(res.View, res.SandboxID))
		changes = append(changes, c)
	}
	out.status = final
	if len(changes) > 0 {
		if _, err := p.store.Append(changes...); err != nil && !errors.Is(err, errdefs.ErrPodNotFound) {
			logx.From(ctx, p.log).Warn("record the events and last status", append(logx.Pod(pod), zap.Error(err))...)
		}
	}
	p.prober.RemovePod(pod.UID)
	if err := p.removePod(ctx, pod); err != nil {
		w.setRetry(p.failureRetry(w))
		return out, err
	}
	failpoint.Inject(failpoint.BeforeStoreDelete)
	rev, err := p.store.Delete(pod.UID)
	if err != nil && !errors.Is(err, errdefs.ErrPodNotFound) {
		w.setRetry(p.failureRetry(w))
		return out, fmt.Errorf("remove pod from the store: %w", err)
	}
	p.retire(w)
	logx.From(ctx, p.log).Info("pod deleted", append(logx.Pod(pod), zap.Int64(logx.Revision, rev))...)
	out.gone = true
	return out, nil
}

// remove removes what the runtime holds for a pod the store does not
// hold, if the node deleted it (or RemoveOrphans; an orphan is kept, see
// orphans.go), and retires its worker. The caller holds w's lock.
func (p *Workers) remove(ctx context.Context, w *worker) error {
	p.prober.RemovePod(w.uid)
	ref, found, err := p.runtimePod(ctx, w.uid)
	if err != nil {
		w.setRetry(p.failureRetry(w))
		return fmt.Errorf("list runtime objects of pod uid %s: %w", w.uid, err)
	}
	if found {
		remove, err := p.mayRemove(w.uid)
		if err != nil {
			w.setRetry(p.failureRetry(w))
			return fmt.Errorf("read pod uid %s from the store: %w", w.uid, err)
		}
		if !remove {
			p.unstored.Keep(ref)
			p.retire(w)
			return nil
		}
		if err := p.removeOrphan(ctx, ref); err != nil {
			w.setRetry(p.failureRetry(w))
			return err
		}
	}
	p.retire(w)
	return nil
}

// publishObserved records the status of what a pass found before it acts
// when the pass is about to restart a container that exited: watchers see
// the exit (state terminated, the exit code) at once rather than after
// the restart's CreateContainer and StartContainer, and the status they
// see next has the new instance. Other passes publish only their result.
// pod.Status becomes the published status. The caller holds w's lock.
func (p *Workers) publishObserved(ctx context.Context, w *worker, pod *corev1.Pod, view model.RuntimeView, actions plan.PodActions) {
	if !restartsExited(view, actions) {
		return
	}
	status := podstatus.ComputePodStatus(pod, view, p.prober.Results(pod.UID), p.clock.Now(),
		p.passStatusOptions(w, syncer.SyncResult{Plan: actions}))
	if store.SameStatus(&pod.Status, &status) {
		return
	}
	// The sandbox the containers ran in: the one the plan keeps, else
	// the last pass's.
	sb := w.lastSandbox()
	if kept := sandboxIn(view, actions.Sandbox.ID); !actions.Sandbox.Create && kept.ID != "" {
		sb = kept
	}
	c := store.StatusChange(store.RefOf(pod), &status)
	c.Sandbox = storedSandbox(sb)
	if _, err := p.store.Append(c); err != nil {
		// The pass's own status follows; this one is only earlier.
		logx.From(ctx, p.log).Warn("record observed status", append(logx.Pod(pod), zap.Error(err))...)
		return
	}
	pod.Status = status
	w.noteStatus(&status)
}

// restartsExited reports whether plan starts again a container whose
// latest instance in view has exited.
func restartsExited(view model.RuntimeView, actions plan.PodActions) bool {
	for _, list := range [][]plan.ContainerAction{actions.Start, actions.StartInit} {
		for _, a := range list {
			if inst := view.FindContainer(a.Name); inst != nil && inst.State == model.ContainerExited {
				return true
			}
		}
	}
	return false
}
