package syncer

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/logx"
)

// A sandbox stopped from outside (`crictl stopp`, the runtime's own
// recovery) is a sandbox change, not a container failure. The runtime
// kills the sandbox's containers before it marks the sandbox not ready,
// so a pass woken by a container's exit can read a view whose sandbox is
// still READY, plan a restart into it, and have the runtime refuse the
// create or the start. Started that way, the container would count a
// restart, leave an exited StartError instance behind that feeds its
// crash-loop back-off, and hold the kubelet's decision (kill the pod,
// create the next sandbox attempt, start the container in it at once)
// back by a back-off. So a pass
//
//   - reads the status of a sandbox it did not create right before it
//     creates a container in it (its view may be older than the
//     sandbox's stop), and
//   - after a refused create or start, reads it again, for a little
//     while (sandboxSettle): containerd refuses the start once the
//     sandbox's pause process is gone, a few milliseconds before it has
//     handled that exit and reports the sandbox not ready — and for
//     longer (sandboxGoneSettle) when the refusal itself says the pause
//     process is gone (a namespace of it no longer exists): the sandbox
//     is dying for certain, and a loaded runtime took seconds to say so;
//
// when the sandbox is no longer ready it starts nothing more in it,
// removes the container the runtime refused to start, reports no failed
// step, and plans once more from a fresh view (replan), which kills the
// pod and creates the next attempt.

// sandboxSettle bounds how long a pass waits after a refused create or
// start for the sandbox to read not ready, and sandboxSettlePoll is how
// often it reads it meanwhile. Real time, not the syncer's clock: the wait
// is for the runtime, which a fake clock does not move.
//
// sandboxGoneSettle is the bound instead when the refusal names a
// namespace of the sandbox's process that no longer exists (pauseGone):
// in a CI run on a loaded 2-core machine containerd still reported the
// sandbox ready more than 500 ms after runc had failed to join its IPC
// namespace, and the container, started into the dead sandbox, was then
// held in a crash-loop back-off in the next one.
const (
	sandboxSettle     = 500 * time.Millisecond
	sandboxGoneSettle = 10 * time.Second
	sandboxSettlePoll = 25 * time.Millisecond
)

// pauseGone matches the runtime's refusal to create a container's task
// because a namespace of the sandbox's process is gone: runc's "namespace
// path: lstat /proc/21014/ns/ipc: no such file or directory" (and the
// same path in other runc versions' words).
var pauseGone = regexp.MustCompile(`(?i)/proc/\d+/ns/[a-z_]+: no such file or directory`)

// stoppedBeforeCreate reports whether the sandbox with id, which the pass
// did not create, is no longer ready right before a container is created
// in it. The pass's first plan is the one checked: the plan made after a
// stop starts in a sandbox the pass created.
func (p *pass) stoppedBeforeCreate(ctx context.Context, id string) bool {
	if _, created := p.newSandboxes[id]; created {
		return false
	}
	return p.sandboxStopped(ctx, id, "before create", 0)
}

// stoppedAfterRefusal reports whether the sandbox with id stopped, when
// the runtime refused to create or start a container in it with
// refusal: it reads the sandbox's status until it is not ready, for at
// most sandboxSettle, or sandboxGoneSettle when the refusal says the
// sandbox's process is gone.
func (p *pass) stoppedAfterRefusal(ctx context.Context, id string, refusal error) bool {
	if ctx.Err() != nil {
		return false
	}
	settle := sandboxSettle
	if refusal != nil && pauseGone.MatchString(refusal.Error()) {
		settle = sandboxGoneSettle
	}
	return p.sandboxStopped(ctx, id, "after a refused start", settle)
}

// sandboxStopped reports whether the sandbox with id is no longer ready,
// as the runtime answers now or within settle (removed counts as
// stopped), and if so
// records it as the sandbox the pass must plan again for, found at stage. A failed read
// counts as ready: what follows fails or succeeds on its own. A pass that
// planned again already reports refused starts as failures, so that a
// sandbox stopped again and again is retried with the failure delay and
// not in a loop.
func (p *pass) sandboxStopped(ctx context.Context, id, stage string, settle time.Duration) bool {
	if p.replanned || id == "" {
		return false
	}
	deadline := time.Now().Add(settle)
	for {
		resp, err := p.s.rt.PodSandboxStatus(ctx, id, false)
		switch {
		case crierrors.IsNotFound(err):
		case err != nil:
			p.log.Debug("read sandbox status around a start", zap.String(logx.SandboxID, id), zap.Error(err))
			return false
		case resp.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_READY:
			if !time.Now().Before(deadline) {
				return false
			}
			t := time.NewTimer(sandboxSettlePoll)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
			continue
		}
		p.stoppedSandbox, p.stoppedStage = id, stage
		return true
	}
}

// dropRefused removes the container with id that the runtime refused to
// start because its sandbox stopped: containerd keeps it exited with
// reason StartError, which would count as a restart and a crash.
func (p *pass) dropRefused(ctx context.Context, name, id string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := p.s.rt.RemoveContainer(cctx, id); err != nil {
		p.log.Warn("remove container refused by a stopped sandbox", zap.String(logx.ContainerName, name),
			zap.String(logx.ContainerID, id), zap.Error(err))
	}
}

// replan plans the pod again from a fresh view after its sandbox stopped
// under the pass, and runs that plan: the kubelet's sandbox change. It
// returns the plan it ran.
func (p *pass) replan(ctx context.Context) (plan.PodActions, error) {
	p.log.Info("sandbox stopped under the pass, planning again", zap.String(logx.SandboxID, p.stoppedSandbox),
		zap.String(logx.Stage, p.stoppedStage))
	p.stoppedSandbox, p.replanned = "", true
	st, err := p.readState(ctx)
	if err != nil {
		return plan.PodActions{}, fmt.Errorf("read runtime state of pod %s: %w", model.PodString(p.pod), err)
	}
	p.st = st
	actions := plan.ComputePodActions(p.pod, st.view, p.in.Probes, p.s.clock.Now(), p.s.backoff)
	if p.in.Observed != nil {
		p.in.Observed(st.view, actions)
	}
	p.execute(ctx, actions)
	return actions, nil
}
