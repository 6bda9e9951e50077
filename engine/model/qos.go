package model

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// GetPodQOS returns the pod's QoS class: pod.Status.QOSClass if set (it is
// immutable), otherwise computed as the kubelet's ComputePodQOS does from
// the CPU and memory requests and limits of all containers.
func GetPodQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputePodQOS(pod)
}

// ComputePodQOS is the kubelet's ComputePodQOS: from the pod-level
// resources when they are set (PodLevelResources, with
// PodLevelResourcesFixKubeletQOSClass), else from the containers'.
func ComputePodQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		return requirementsQOS(pod.Spec.Resources)
	}
	requests := corev1.ResourceList{}
	limits := corev1.ResourceList{}
	zero := resource.MustParse("0")
	guaranteed := true
	all := append(append([]corev1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
	for _, c := range all {
		for name, q := range c.Resources.Requests {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				continue
			}
			if q.Cmp(zero) == 1 {
				d := q.DeepCopy()
				if cur, ok := requests[name]; ok {
					d.Add(cur)
				}
				requests[name] = d
			}
		}
		found := map[corev1.ResourceName]bool{}
		for name, q := range c.Resources.Limits {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				continue
			}
			if q.Cmp(zero) == 1 {
				found[name] = true
				d := q.DeepCopy()
				if cur, ok := limits[name]; ok {
					d.Add(cur)
				}
				limits[name] = d
			}
		}
		if !found[corev1.ResourceCPU] || !found[corev1.ResourceMemory] {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// requirementsQOS is the kubelet's: the QoS class of one set of
// requirements, over cpu and memory.
func requirementsQOS(r *corev1.ResourceRequirements) corev1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	var qos corev1.PodQOSClass
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		var q corev1.PodQOSClass
		switch {
		case !req.Equal(lim):
			return corev1.PodQOSBurstable
		case req.IsZero():
			q = corev1.PodQOSBestEffort
		default:
			q = corev1.PodQOSGuaranteed
		}
		if qos == "" {
			qos = q
		} else if qos != q {
			return corev1.PodQOSBurstable
		}
	}
	return qos
}
