package syncer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
)

// Step actions and failure reason of an in-place resize.
const (
	// ActionUpdateContainerResources is one CRI UpdateContainerResources
	// call: one container's memory, or its CPU, changed in place.
	ActionUpdateContainerResources StepAction = "UpdateContainerResources"
	// ActionUpdatePodSandboxResources tells the runtime the pod's new
	// aggregate resources (CRI UpdatePodSandboxResources), before the
	// containers when the pod grows, after them when it shrinks.
	ActionUpdatePodSandboxResources StepAction = "UpdatePodSandboxResources"
	// ReasonResizePodInPlaceError is the kubelet's ErrResizePodInPlace.
	ReasonResizePodInPlaceError = "ResizePodInPlaceError"
	// ReasonResize is the reason of the resize steps that succeeded.
	ReasonResize = "ResizePodInPlace"
)

// admitResize asks the node to admit the resize the pod requests, if any.
// Refused, the pass runs the allocated pod (plan.AllocatedPod) and the
// resize is pending, Deferred as the kubelet's status manager reports
// every resize that does not fit.
func (p *pass) admitResize() *plan.ResizePending {
	if p.in.AdmitResize == nil || !plan.ResizeRequested(p.pod, &p.st.view) {
		return nil
	}
	ok, msg := p.in.AdmitResize(p.pod)
	if ok {
		return nil
	}
	p.pod = plan.AllocatedPod(p.pod, &p.st.view)
	return &plan.ResizePending{Reason: corev1.PodReasonDeferred, Message: msg}
}

// resize is the kubelet's doPodResizeAction: memory first, then CPU; for
// each, the pod-level resources when they grow, the containers resized in
// place (their decreases first), the pod-level resources when they
// shrink. The containers that start with new resources (StartResized: a
// resize that restarts them, killed by now) change the pod level too,
// and start later in the pass. It stops at the first failure, reported
// as a ResizePodInPlaceError step (the pass goes on); the next pass
// retries what is left.
//
// NOTE(podsync): podsync writes no pod-level cgroup limits (the runtime
// creates the pod cgroup as the containers' parent), so the pod level is
// the runtime's UpdatePodSandboxResources, best effort as in the kubelet:
// a runtime that does not implement it (containerd 1.6) is skipped. What
// the pod runs with before is read from its containers' instances (the
// kubelet reads its pod cgroup).
func (p *pass) resize(ctx context.Context, actions plan.PodActions, sandboxID string) {
	rs, started := actions.Resize, actions.StartResized
	if (len(rs) == 0 && len(started) == 0) || ctx.Err() != nil {
		return
	}
	current := map[string]plan.ContainerResources{}
	for _, r := range slices.Concat(rs, started) {
		current[r.Name] = r.Current
	}
	// What the pod runs with as the resize goes on.
	running := criconfig.WithResources(p.pod, current)
	for _, name := range []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceCPU} {
		order := plan.ResizeOrder(rs, name)
		if len(order) == 0 && len(started) == 0 {
			continue
		}
		for _, r := range slices.Concat(order, started) {
			cur := current[r.Name]
			switch name {
			case corev1.ResourceMemory:
				cur.MemoryLimit, cur.MemoryRequest = r.Desired.MemoryLimit, r.Desired.MemoryRequest
			case corev1.ResourceCPU:
				cur.CPULimit, cur.CPURequest = r.Desired.CPULimit, r.Desired.CPURequest
			}
			current[r.Name] = cur
		}
		next := criconfig.WithResources(p.pod, current)
		before := criconfig.SandboxResources(running, sandboxID, p.s.cfg)
		after := criconfig.SandboxResources(next, sandboxID, p.s.cfg)
		grows, shrinks := podLevelChange(name, before.GetResources(), after.GetResources())
		if grows && !p.updatePodSandboxResources(ctx, after) {
			return
		}
		for _, r := range order {
			if !p.updateContainerResources(ctx, r, name, current[r.Name]) {
				return
			}
		}
		if shrinks && !p.updatePodSandboxResources(ctx, after) {
			return
		}
		running = next
	}
}

// podLevelChange reports whether the pod's limit or request of resource
// grows (then the pod level is updated first) or shrinks (last). An unset
// limit is unlimited.
func podLevelChange(name corev1.ResourceName, before, after *runtimeapi.LinuxContainerResources) (grows, shrinks bool) {
	cmpLimit := func(a, b int64) int { // -1: b smaller, 1: b larger
		switch {
		case a == b:
			return 0
		case b == 0 || (a != 0 && b > a):
			return 1
		default:
			return -1
		}
	}
	var d []int
	switch name {
	case corev1.ResourceMemory:
		d = []int{cmpLimit(before.GetMemoryLimitInBytes(), after.GetMemoryLimitInBytes())}
	case corev1.ResourceCPU:
		d = []int{cmpLimit(before.GetCpuQuota(), after.GetCpuQuota())}
		switch s0, s1 := before.GetCpuShares(), after.GetCpuShares(); {
		case s1 > s0:
			d = append(d, 1)
		case s1 < s0:
			d = append(d, -1)
		}
	}
	for _, v := range d {
		grows = grows || v > 0
		shrinks = shrinks || v < 0
	}
	return grows, shrinks
}

// updateContainerResources applies one container's resource of a resize,
// with the other resource as it runs now (the kubelet's
// updatePodContainerResources).
func (p *pass) updateContainerResources(ctx context.Context, r plan.ResizeAction, name corev1.ResourceName, values plan.ContainerResources) bool {
	start := p.s.clock.Now()
	step := StepResult{Action: ActionUpdateContainerResources, Target: r.Name, ContainerType: containerType(p.pod, r.Name),
		Reason: ReasonResize, Start: start, ContainerID: r.ContainerID, SandboxID: p.st.sandboxOf[r.ContainerID]}
	for _, inst := range p.st.view.Containers {
		if inst.ID == r.ContainerID {
			step.Attempt = uint32(inst.RestartCount)
		}
	}
	c := model.SpecContainer(p.pod, r.Name)
	res := criconfig.ContainerResources(p.pod, c, values, p.s.cfg)
	lr := res.GetLinux()
	step.Message = fmt.Sprintf("Resized %s of container %s: cpu shares %d, cpu quota %d, memory limit %d", name, r.Name,
		lr.GetCpuShares(), lr.GetCpuQuota(), lr.GetMemoryLimitInBytes())
	if err := p.s.rt.UpdateContainerResources(ctx, r.ContainerID, res); err != nil {
		step.Err = fmt.Errorf("update %s of container %q: %w", name, r.Name, err)
		step.Reason, step.Message = ReasonResizePodInPlaceError, step.Err.Error()
	}
	step.Duration = p.s.clock.Since(start)
	p.rec.add(step)
	return step.Err == nil
}

// updatePodSandboxResources is the kubelet's updatePodSandboxResources:
// a runtime that does not implement the call is skipped.
func (p *pass) updatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) bool {
	start := p.s.clock.Now()
	step := StepResult{Action: ActionUpdatePodSandboxResources, Target: req.GetPodSandboxId(), SandboxID: req.GetPodSandboxId(),
		Reason: ReasonResize, Start: start}
	_, err := p.s.rt.UpdatePodSandboxResources(ctx, req)
	switch {
	case err == nil:
		lr := req.GetResources()
		step.Message = fmt.Sprintf("Updated the pod's resources: cpu shares %d, cpu quota %d, memory limit %d",
			lr.GetCpuShares(), lr.GetCpuQuota(), lr.GetMemoryLimitInBytes())
	case unimplemented(err):
		// Best effort, as in the kubelet (containerd 2.2 answers Unknown).
		step.Message = "The runtime does not implement UpdatePodSandboxResources; skipped"
	default:
		step.Err = fmt.Errorf("update resources of sandbox %q: %w", req.GetPodSandboxId(), err)
		step.Reason, step.Message = ReasonResizePodInPlaceError, step.Err.Error()
	}
	step.Duration = p.s.clock.Since(start)
	p.rec.add(step)
	return step.Err == nil
}

// unimplemented reports whether err is the runtime's answer to a call it
// does not implement: gRPC's Unimplemented, or containerd 2.2's Unknown
// "not implemented yet", which the kubelet matches by its text too.
//
// NOTE(podsync): the engine does not import gRPC, so the code is read
// from the status error's text ("rpc error: code = Unimplemented desc =
// …"), which grpc-go has kept stable.
func unimplemented(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "code = Unimplemented") ||
		(strings.Contains(msg, "code = Unknown") && strings.Contains(msg, "not implemented"))
}
