package podstatus

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
)

// The kubelet's floors (pkg/kubelet/cm): at or below them an actual CPU
// request (from cpu.shares) or limit (from the CFS quota) is reported as
// the allocated value.
const (
	minSharesMilli   = 2
	minMilliCPULimit = 10
)

// resizeConditions are the kubelet's PodResizePending and
// PodResizeInProgress conditions (pkg/kubelet/status): pending while the
// node has not admitted a resize, in progress while an admitted one is not
// yet what the runtime runs (reason Error, with its message, after a
// failed attempt).
func resizeConditions(pod *corev1.Pod, view *model.RuntimeView, opts StatusOptions) []corev1.PodCondition {
	if p := opts.ResizePending; p != nil {
		return []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: p.Reason, Message: p.Message}}
	}
	if !plan.ResizeInProgress(pod, view) {
		return nil
	}
	c := corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}
	if opts.ResizeError != "" {
		c.Reason, c.Message = corev1.PodReasonError, opts.ResizeError
	}
	return []corev1.PodCondition{c}
}

// allocatedContainer is the container as the node allocated it: the
// spec's, or while a resize is pending, what it runs with.
func (sc *statusConverter) allocatedContainer(c *corev1.Container) *corev1.Container {
	if sc.opts.ResizePending == nil {
		return c
	}
	if sc.allocated == nil {
		sc.allocated = plan.AllocatedPod(sc.pod, sc.view)
	}
	if a := model.SpecContainer(sc.allocated, c.Name); a != nil {
		return a
	}
	return c
}

// resources sets the status's resources and allocatedResources of a
// container the runtime holds, as the kubelet's convertToAPIContainerStatuses
// (convertContainerStatusResources): allocatedResources are the allocated
// requests; resources are the allocated ones, with the CPU request and
// limit and the memory limit the runtime reports for a running container
// (CPU values at or below the kubelet's floors on both sides stay the
// allocated ones). A memory request reaches no cgroup: it is the
// allocated one, which the kubelet's actuated-resources checkpoint holds
// once a resize succeeded and podsync, which applies it with nothing, at
// once.
func (sc *statusConverter) resources(c *corev1.Container, inst *model.ContainerInstance, st *corev1.ContainerStatus) {
	alloc := sc.allocatedContainer(c)
	st.AllocatedResources = alloc.Resources.Requests.DeepCopy()
	res := alloc.Resources.DeepCopy()
	st.Resources = res
	if inst.State != model.ContainerRunning || inst.Resources == nil {
		return
	}
	rr := inst.Resources
	if res.Limits != nil {
		if rr.CPUQuota > 0 && rr.CPUPeriod > 0 {
			actual := rr.CPUQuota * 1000 / rr.CPUPeriod
			if actual > minMilliCPULimit || res.Limits.Cpu().MilliValue() > minMilliCPULimit {
				res.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(actual, resource.DecimalSI)
			}
		}
		if rr.MemoryLimitInBytes > 0 {
			res.Limits[corev1.ResourceMemory] = *resource.NewQuantity(rr.MemoryLimitInBytes, resource.BinarySI)
		}
	}
	if res.Requests != nil {
		if actual, ok := plan.ActualResources(inst); ok && rr.CPUShares != 0 {
			if actual.CPURequest > minSharesMilli || res.Requests.Cpu().MilliValue() > minSharesMilli {
				res.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(actual.CPURequest, resource.DecimalSI)
			}
		}
	}
}
