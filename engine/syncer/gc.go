package syncer

import (
	"context"
	"fmt"
	"slices"

	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
)

// collectGarbage removes what findGarbage picks and returns the state
// without it. Failures are reported and otherwise ignored: the next pass
// tries again.
func (p *pass) collectGarbage(ctx context.Context, st podState) podState {
	g := plan.FindGarbage(p.pod, &st.view, st.sandboxOf, p.s.backoff)
	if len(g.Containers) == 0 && len(g.Sandboxes) == 0 {
		return st
	}
	// removeContainer reads sandbox IDs from the pass's state.
	p.st.sandboxOf = st.sandboxOf
	removed := map[string]bool{}
	for _, inst := range g.Containers {
		failpoint.Inject(failpoint.GCRemoveContainer)
		if p.removeContainer(ctx, inst, ReasonGarbageCollected) {
			removed[inst.ID] = true
		}
	}
	for _, sb := range g.Sandboxes {
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
	st.view.Containers = slices.DeleteFunc(slices.Clone(st.view.Containers), func(c model.ContainerInstance) bool { return removed[c.ID] })
	st.view.Sandboxes = slices.DeleteFunc(slices.Clone(st.view.Sandboxes), func(s model.Sandbox) bool { return removed[s.ID] })
	return st
}
