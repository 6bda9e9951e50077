package plan

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// ComputePodQOS is the kubelet's ComputePodQOS (without pod-level
// resources, which podsync rejects).
func ComputePodQOS(pod *corev1.Pod) corev1.PodQOSClass {
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
