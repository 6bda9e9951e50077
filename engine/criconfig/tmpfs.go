package criconfig

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TmpfsSize is the size of the tmpfs of a memory-backed volume, the
// kubelet's calculateEmptyDirMemorySize: the node's allocatable memory
// (NodeAllocatable, else MemoryCapacity), or the pod's memory limit if
// the pod has one (every container declares a memory limit, as the
// kubelet's pod cgroup requires) and it is smaller, or sizeLimit if it is
// set and smaller still. Zero means no size option (the kernel's default,
// half the node's memory): the node's memory is unknown and nothing else
// bounds it. Secret volumes, which the kubelet mounts as a memory emptyDir
// without a size limit, pass nil.
func TmpfsSize(pod *corev1.Pod, sizeLimit *resource.Quantity, opts Options) int64 {
	size := opts.MemoryCapacity
	if q, ok := opts.NodeAllocatable[corev1.ResourceMemory]; ok && q.Value() > 0 {
		size = q.Value()
	}
	if lim := podMemoryLimit(pod); lim > 0 && (size <= 0 || lim <= size) {
		size = lim
	}
	if sizeLimit != nil {
		if v := sizeLimit.Value(); v > 0 && (size <= 0 || v <= size) {
			size = v
		}
	}
	return max(size, 0)
}

// podMemoryLimit is the memory limit of the kubelet's pod cgroup
// (ResourceConfigForPod): the pod's aggregate memory limit plus its
// overhead, if every container and init container declares a memory
// limit; zero otherwise.
func podMemoryLimit(pod *corev1.Pod) int64 {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Resources.Limits.Memory().IsZero() {
				return 0
			}
		}
	}
	lim := aggregate(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Limits })
	v := lim.Memory().Value()
	if oh := pod.Spec.Overhead; oh != nil {
		v += oh.Memory().Value()
	}
	return v
}

// PodLimits is the kubelet's PodLimits: the limits of the regular
// containers and sidecars added up, the other init containers counted as
// their maximum (with the sidecars started before them). A resource no
// container limits is absent.
func PodLimits(pod *corev1.Pod) corev1.ResourceList {
	return aggregate(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Limits })
}
