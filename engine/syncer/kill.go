package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
)

// killPod is the kubelet's killPodWithSyncResult: it kills every running
// container at once — a sidecar, after its preStop hook, waits for the
// regular containers and the sidecars after it to stop, within its grace
// period (the kubelet's terminationOrdering), so sidecars outlive the
// containers they serve — and then stops every sandbox of the pod. It
// carries on past failures and reports whether everything stopped.
func (p *pass) killPod(ctx context.Context, actions plan.PodActions) bool {
	ips := p.readyIPs()
	var order *terminationOrdering
	if hasRestartableInitContainer(p.pod) {
		running := make([]string, 0, len(actions.Kill))
		for _, k := range actions.Kill {
			running = append(running, k.Name)
		}
		order = newTerminationOrdering(p.pod, running, p.s.clock)
	}
	var mu sync.Mutex
	ok := true
	var wg sync.WaitGroup
	for _, k := range actions.Kill {
		wg.Go(func() {
			if !p.killContainer(ctx, k, ips, order) {
				mu.Lock()
				ok = false
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if !p.killSandboxes(ctx, actions) {
		ok = false
	}
	return ok
}

func hasRestartableInitContainer(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return model.IsRestartableInitContainer(&c) })
}

// killSandboxes stops every sandbox of the pod, ready or not, and reports
// it as the kubelet's killPodWithSyncResult does: one KillPodSandbox step
// for the pod, its target the pod's UID, failed with the last refusal if
// any sandbox could not be stopped (each refusal is in its error). A pod
// without a sandbox has no step (the kubelet reports one for an empty
// pod too, on every new pod's first pass).
func (p *pass) killSandboxes(ctx context.Context, actions plan.PodActions) bool {
	sbs := p.st.view.Sandboxes
	if len(sbs) == 0 {
		return true
	}
	start := p.s.clock.Now()
	step := StepResult{Action: ActionKillPodSandbox, Target: string(p.pod.UID), Attempt: sbs[0].Attempt,
		Reason: actions.KillPodReason, Message: actions.KillPodMessage, Start: start}
	var errs []error
	for _, sb := range sbs {
		if err := p.s.rt.StopPodSandbox(ctx, sb.ID); err != nil && !crierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.ID, err))
			step.Reason, step.Message = ReasonKillPodSandboxError, err.Error()
		}
	}
	step.Err = errors.Join(errs...)
	step.Duration = p.s.clock.Since(start)
	p.rec.add(step)
	return step.Err == nil
}

// terminationGracePeriod is the kubelet's setTerminationGracePeriod: the
// pod's deletion grace period, else the probe's terminationGracePeriod for
// a probe kill, else the pod's terminationGracePeriodSeconds, else 2 s.
// An evicted pod's containers get the kubelet eviction manager's override
// (plan.EvictionGracePeriodSeconds) before any of them.
func terminationGracePeriod(pod *corev1.Pod, c *corev1.Container, reason string) int64 {
	switch {
	case plan.IsEvicted(pod):
		return plan.EvictionGracePeriodSeconds
	case pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		switch {
		case reason == plan.ReasonStartupProbe && c != nil && c.StartupProbe != nil && c.StartupProbe.TerminationGracePeriodSeconds != nil:
			return *c.StartupProbe.TerminationGracePeriodSeconds
		case reason == plan.ReasonLivenessProbe && c != nil && c.LivenessProbe != nil && c.LivenessProbe.TerminationGracePeriodSeconds != nil:
			return *c.LivenessProbe.TerminationGracePeriodSeconds
		}
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return minimumGracePeriod
}

// killContainer is the kubelet's killContainer: the preStop hook, bounded
// by the grace period, then, in a whole-pod kill (order not nil), the wait
// for the container's turn, bounded by what remains of it, then
// StopContainer with what remains after both (at least 2 s): the whole
// seconds the hook and the wait took are subtracted. A container no longer in the spec is stopped with the grace
// period and preStop hook recorded in its annotations. It reports a
// KillContainer step and whether the container stopped.
func (p *pass) killContainer(ctx context.Context, k plan.ContainerAction, podIPs []string, order *terminationOrdering) bool {
	start := p.s.clock.Now()
	attempt := k.Attempt
	for _, inst := range p.st.view.Containers {
		if inst.ID == k.ContainerID {
			attempt = uint32(inst.RestartCount)
		}
	}
	ctype := containerType(p.pod, k.Name)
	msg := k.Message
	if msg == "" {
		msg = fmt.Sprintf("Stopping container %s", k.Name)
	}
	step := StepResult{Action: ActionKillContainer, Target: k.Name, ContainerType: ctype, Reason: k.Reason,
		Message: msg, Start: start, ContainerID: k.ContainerID, SandboxID: p.st.sandboxOf[k.ContainerID], Attempt: attempt}
	fail := func(err error) bool {
		step.Duration = p.s.clock.Since(start)
		step.Err, step.Reason, step.Message = err, ReasonKillContainerError, err.Error()
		p.rec.add(step)
		return false
	}

	var preStop *corev1.LifecycleHandler
	var ports []corev1.ContainerPort
	var grace int64
	if c := model.SpecContainer(p.pod, k.Name); c != nil {
		grace = terminationGracePeriod(p.pod, c, k.Reason)
		if c.Lifecycle != nil {
			preStop = c.Lifecycle.PreStop
		}
		ports = c.Ports
	} else {
		// The kubelet's restoreSpecsFromContainerLabels.
		resp, err := p.s.rt.ContainerStatus(ctx, k.ContainerID, false)
		if crierrors.IsNotFound(err) {
			step.Duration = p.s.clock.Since(start)
			p.rec.add(step)
			return true
		}
		if err != nil {
			return fail(fmt.Errorf("restore spec of container %q: %w", k.Name, err))
		}
		info := model.ContainerAnnotationsFrom(resp.GetStatus().GetAnnotations())
		restored := &corev1.Pod{ObjectMeta: p.pod.ObjectMeta, Status: p.pod.Status}
		restored.DeletionGracePeriodSeconds = info.PodDeletionGracePeriod
		if p.pod.DeletionGracePeriodSeconds != nil {
			restored.DeletionGracePeriodSeconds = p.pod.DeletionGracePeriodSeconds
		}
		restored.Spec.TerminationGracePeriodSeconds = info.PodTerminationGracePeriod
		grace = terminationGracePeriod(restored, nil, k.Reason)
		preStop = info.PreStopHandler
		ports = info.ContainerPorts
	}

	if preStop != nil && grace > 0 {
		grace -= p.runPreStop(ctx, k, ctype, attempt, preStop, ports, podIPs, grace)
	}
	if order != nil && grace > 0 {
		// Whole seconds, truncated, as the kubelet counts them.
		grace -= int64(order.waitForTurn(ctx, k.Name, grace).Seconds())
	}
	grace = max(grace, minimumGracePeriod)
	if err := p.s.rt.StopContainer(ctx, k.ContainerID, grace); err != nil && !crierrors.IsNotFound(err) {
		return fail(fmt.Errorf("stop container %q: %w", k.Name, err))
	}
	failpoint.Inject(failpoint.AfterContainerStopped)
	if order != nil {
		order.containerTerminated(k.Name)
	}
	step.Duration = p.s.clock.Since(start)
	p.rec.add(step)
	return true
}

// runPreStop is the kubelet's executePreStopHook: it runs the hook for at
// most the grace period, reports a PreStopHook step, and returns the whole
// seconds it took.
func (p *pass) runPreStop(ctx context.Context, k plan.ContainerAction, ctype ContainerType, attempt uint32, h *corev1.LifecycleHandler, ports []corev1.ContainerPort, podIPs []string, grace int64) int64 {
	start := p.s.clock.Now()
	limit := time.Duration(grace) * time.Second
	hctx, cancel := context.WithTimeout(ctx, limit)
	t := hookTarget{pod: p.pod, name: k.Name, containerID: k.ContainerID, ports: ports, podIPs: podIPs}
	msg, err := p.s.runHook(hctx, t, h, limit)
	cancel()
	elapsed := min(p.s.clock.Since(start), limit)
	step := StepResult{Action: ActionPreStopHook, Target: k.Name, ContainerType: ctype, Start: start, Duration: elapsed,
		ContainerID: k.ContainerID, SandboxID: p.st.sandboxOf[k.ContainerID], Attempt: attempt}
	if err != nil {
		step.Err = fmt.Errorf("pre-stop hook of container %q: %w", k.Name, err)
		step.Reason, step.Message = ReasonPreStopHookError, msg
	}
	p.rec.add(step)
	return int64(elapsed.Seconds())
}

// purgeInitContainers is the kubelet's: a new sandbox runs the init
// containers from the first, so every instance of them is removed, or the
// planner would take the old sandbox's for the new one's.
func (p *pass) purgeInitContainers(ctx context.Context) {
	for _, c := range p.pod.Spec.InitContainers {
		for _, inst := range p.st.view.Containers {
			if inst.Name == c.Name {
				p.removeContainer(ctx, inst, ReasonInitContainersPurged)
			}
		}
	}
}

// pruneInitContainers removes the dead init container instances the plan
// prunes, as the kubelet's pruneInitContainersBeforeStart: a removal that
// fails is reported and the pass goes on.
func (p *pass) pruneInitContainers(ctx context.Context, prune []plan.ContainerAction) {
	for _, a := range prune {
		if ctx.Err() != nil {
			return
		}
		i := slices.IndexFunc(p.st.view.Containers, func(c model.ContainerInstance) bool { return c.ID == a.ContainerID })
		if i < 0 {
			continue
		}
		p.removeContainer(ctx, p.st.view.Containers[i], a.Reason)
	}
}

// removeContainer removes one dead instance and reports it.
func (p *pass) removeContainer(ctx context.Context, inst model.ContainerInstance, reason string) bool {
	start := p.s.clock.Now()
	step := StepResult{Action: ActionRemoveContainer, Target: inst.Name, ContainerType: containerType(p.pod, inst.Name),
		Reason: reason, Start: start, ContainerID: inst.ID, SandboxID: p.st.sandboxOf[inst.ID], Attempt: uint32(inst.RestartCount)}
	err := p.s.rt.RemoveContainer(ctx, inst.ID)
	step.Duration = p.s.clock.Since(start)
	if err != nil && !crierrors.IsNotFound(err) {
		step.Err = fmt.Errorf("remove container %s: %w", inst.ID, err)
		step.Reason, step.Message = ReasonRemoveContainerError, err.Error()
		p.rec.add(step)
		return false
	}
	p.rec.add(step)
	return true
}
