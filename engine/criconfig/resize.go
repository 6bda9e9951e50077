package criconfig

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/plan"
)

// ContainerResources is the kubelet's generateContainerResources for an
// in-place resize: the Linux resources of c (a container of pod) with its
// CPU and memory set to r, as UpdateContainerResources is given them.
func ContainerResources(pod *corev1.Pod, c *corev1.Container, r plan.ContainerResources, opts Options) *runtimeapi.ContainerResources {
	opts = opts.WithDefaults()
	rc := c.DeepCopy()
	rc.Resources = withValues(c.Resources, r)
	var cpuReq *resource.Quantity
	if q, ok := rc.Resources.Requests[corev1.ResourceCPU]; ok {
		cpuReq = &q
	}
	lr := linuxResources(cpuReq, rc.Resources.Limits.Cpu(), rc.Resources.Limits.Memory(), opts)
	lr.OomScoreAdj = containerOOMScoreAdjust(pod, rc, opts.MemoryCapacity)
	return &runtimeapi.ContainerResources{Linux: lr}
}

// SandboxResources is the pod-level part of the sandbox config
// (sandboxLinuxConfig): the pod's aggregate CPU and memory and its
// overhead, as UpdatePodSandboxResources is given them.
func SandboxResources(pod *corev1.Pod, sandboxID string, opts Options) *runtimeapi.UpdatePodSandboxResourcesRequest {
	lc := sandboxLinuxConfig(pod, opts.WithDefaults())
	return &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: sandboxID, Resources: lc.Resources, Overhead: lc.Overhead}
}

// WithResources returns a copy of pod whose containers named in rs have
// those resources: the pod as it runs before (Current) or after (Desired)
// a resize.
func WithResources(pod *corev1.Pod, rs map[string]plan.ContainerResources) *corev1.Pod {
	out := pod.DeepCopy()
	set := func(cs []corev1.Container) {
		for i := range cs {
			if r, ok := rs[cs[i].Name]; ok {
				cs[i].Resources = withValues(cs[i].Resources, r)
			}
		}
	}
	set(out.Spec.InitContainers)
	set(out.Spec.Containers)
	return out
}

// withValues returns req with its CPU and memory set to r.
func withValues(req corev1.ResourceRequirements, r plan.ContainerResources) corev1.ResourceRequirements {
	return r.Apply(req)
}
