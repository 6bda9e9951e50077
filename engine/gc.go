package engine

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/podsync/podsync/internal/failpoint"
)

// garbage is what the per-pod garbage collection removes.
type garbage struct {
	containers []ContainerInstance
	sandboxes  []Sandbox
}

// findGarbage picks the dead instances and sandboxes of a pod that are no
// longer needed, as the kubelet's container GC with MaxPerPodContainer 1
// does, adapted to podsync's back-off, which is computed from what the
// runtime holds. Of each container in the spec it keeps
//
//   - the newest instance (its state is the container's state),
//   - the newest exited one beside it (its last termination state), and
//   - the first exited instance of the current crash-loop run, whose
//     restart count tells CrashLoopBackoff how long the run is;
//
// a created-but-never-started instance that is not the newest (left by a
// failed or interrupted pass) is removed, and so is every dead instance of
// a container no longer in the spec. Running and unknown instances are
// never removed. A sandbox is removed when it is not ready, not the newest,
// and holds no container any more (the kubelet's evictSandboxes).
func findGarbage(pod *corev1.Pod, st *podState, bo BackoffPolicy) garbage {
	var g garbage
	keep := map[string]bool{}
	byName := map[string][]*ContainerInstance{}
	var names []string
	for i := range st.view.Containers {
		inst := &st.view.Containers[i]
		if _, ok := byName[inst.Name]; !ok {
			names = append(names, inst.Name)
		}
		byName[inst.Name] = append(byName[inst.Name], inst)
	}
	for _, name := range names {
		insts := byName[name]
		c := specContainer(pod, name)
		if c != nil {
			keep[insts[0].ID] = true
			// Created instances behind the newest are junk; skip them.
			var history []*ContainerInstance
			for _, inst := range insts[1:] {
				if inst.State != ContainerCreated {
					history = append(history, inst)
				}
			}
			if i := slices.IndexFunc(history, func(x *ContainerInstance) bool { return x.State == ContainerExited }); i >= 0 {
				keep[history[i].ID] = true
			}
			if first := crashLoopRunStart(pod, c, append([]*ContainerInstance{insts[0]}, history...), bo); first != nil {
				keep[first.ID] = true
			}
		}
		for _, inst := range insts {
			if keep[inst.ID] || (inst.State != ContainerExited && inst.State != ContainerCreated) {
				continue
			}
			g.containers = append(g.containers, *inst)
		}
	}
	used := map[string]bool{}
	for _, inst := range st.view.Containers {
		if !slices.ContainsFunc(g.containers, func(x ContainerInstance) bool { return x.ID == inst.ID }) {
			used[st.sandboxOf[inst.ID]] = true
		}
	}
	for i, sb := range st.view.Sandboxes {
		if i == 0 || sb.State == SandboxReady || used[sb.ID] {
			continue
		}
		g.sandboxes = append(g.sandboxes, sb)
	}
	return g
}

// crashLoopRunStart returns the oldest instance of the run of failures
// CrashLoopBackoff counts (it walks the instances the same way), or nil.
func crashLoopRunStart(pod *corev1.Pod, c *corev1.Container, insts []*ContainerInstance, bo BackoffPolicy) *ContainerInstance {
	hash := ContainerHash(pod, c)
	var newest, first *ContainerInstance
	for _, inst := range insts {
		if newest == nil {
			if inst.State != ContainerExited {
				continue
			}
			if inst.Hash != hash {
				return nil
			}
			newest = inst
		}
		if inst.State != ContainerExited || inst.Hash != hash {
			break
		}
		first = inst
		if !inst.StartedAt.IsZero() && inst.FinishedAt.Sub(inst.StartedAt) > bo.resetAfter() {
			break
		}
	}
	return first
}

// collectGarbage removes what findGarbage picks and returns the state
// without it. Failures are reported and otherwise ignored: the next pass
// tries again.
func (p *pass) collectGarbage(ctx context.Context, st podState) podState {
	g := findGarbage(p.pod, &st, p.s.backoff)
	if len(g.containers) == 0 && len(g.sandboxes) == 0 {
		return st
	}
	// removeContainer reads sandbox IDs from the pass's state.
	p.st.sandboxOf = st.sandboxOf
	removed := map[string]bool{}
	for _, inst := range g.containers {
		failpoint.Inject(failpoint.GCRemoveContainer)
		if p.removeContainer(ctx, inst, ReasonGarbageCollected) {
			removed[inst.ID] = true
		}
	}
	for _, sb := range g.sandboxes {
		start := p.s.clock.Now()
		step := StepResult{Action: ActionRemovePodSandbox, Target: sb.ID, SandboxID: sb.ID, Attempt: sb.Attempt,
			Reason: ReasonGarbageCollected, Start: start}
		// A sandbox whose pause process died is not ready but may still
		// hold its network: stop it before removing it.
		err := p.s.rt.StopPodSandbox(ctx, sb.ID)
		if err == nil || crierrors.IsNotFound(err) {
			failpoint.Inject(failpoint.GCRemoveSandbox)
			err = p.s.rt.RemovePodSandbox(ctx, sb.ID)
		}
		step.Duration = p.s.clock.Since(start)
		if err != nil && !crierrors.IsNotFound(err) {
			step.Err = fmt.Errorf("remove sandbox %s: %w", sb.ID, err)
			step.Reason, step.Message = ReasonRemovePodSandboxError, err.Error()
		} else {
			removed[sb.ID] = true
		}
		p.rec.add(step)
	}
	st.view.Containers = slices.DeleteFunc(slices.Clone(st.view.Containers), func(c ContainerInstance) bool { return removed[c.ID] })
	st.view.Sandboxes = slices.DeleteFunc(slices.Clone(st.view.Sandboxes), func(s Sandbox) bool { return removed[s.ID] })
	return st
}
