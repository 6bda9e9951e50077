package criconfig

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/podsync/podsync/engine/model"
)

// CPU constants of the kubelet's pkg/kubelet/cm (helpers_linux.go).
const (
	minShares       = 2
	maxShares       = 262144
	sharesPerCPU    = 1024
	milliCPUToCPU   = 1000
	quotaPeriod     = 100000 // µs
	minQuotaPeriod  = 1000   // µs
	guaranteedOOM   = -997
	besteffortOOM   = 1000
	CgroupfsDriver  = "cgroupfs"
	systemdDriver   = "systemd"
	kubepodsCgroup  = "kubepods"
	podCgroupPrefix = "pod"
)

// milliCPUToShares is the kubelet's: CPU shares for a CPU request in
// millicores, clamped to [MinShares, MaxShares].
func milliCPUToShares(milliCPU int64) uint64 {
	if milliCPU == 0 {
		return minShares
	}
	shares := (milliCPU * sharesPerCPU) / milliCPUToCPU
	if shares < minShares {
		return minShares
	}
	if shares > maxShares {
		return maxShares
	}
	return uint64(shares)
}

// milliCPUToQuota is the kubelet's: the CFS quota for a CPU limit in
// millicores over period µs, at least MinQuotaPeriod; 0 for no limit.
func milliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	quota := (milliCPU * period) / milliCPUToCPU
	if quota < minQuotaPeriod {
		quota = minQuotaPeriod
	}
	return quota
}

// PodCgroupParent returns the pod's cgroup, as the kubelet's
// GetPodCgroupParent: kubepods[/burstable|/besteffort]/pod<uid> under the
// cgroup root, as a cgroupfs path or, for the systemd driver, the expanded
// slice path (/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice).
func PodCgroupParent(pod *corev1.Pod, opts Options) string {
	return cgroupPath(append(qosCgroupName(model.GetPodQOS(pod), opts), podCgroupPrefix+string(pod.UID)), opts)
}

// QoSCgroup returns the cgroup under which the pods of a QoS class live,
// as the kubelet's QoS container manager names it: kubepods under the
// cgroup root for Guaranteed pods (the kubelet's node-allocatable cgroup,
// which holds the others), kubepods/burstable and kubepods/besteffort for
// the others; a cgroupfs path or, for the systemd driver, the expanded
// slice path. Whoever owns QoSCgroup(Guaranteed) owns every pod cgroup of
// the node.
func QoSCgroup(qos corev1.PodQOSClass, opts Options) string {
	return cgroupPath(qosCgroupName(qos, opts), opts)
}

// qosCgroupName is the cgroup name (its elements) of a QoS class's
// cgroup under the cgroup root.
func qosCgroupName(qos corev1.PodQOSClass, opts Options) []string {
	opts = opts.WithDefaults()
	var name []string
	for _, p := range strings.Split(opts.CgroupRoot, "/") {
		if p != "" {
			name = append(name, p)
		}
	}
	name = append(name, kubepodsCgroup)
	switch qos {
	case corev1.PodQOSBurstable:
		name = append(name, "burstable")
	case corev1.PodQOSBestEffort:
		name = append(name, "besteffort")
	}
	return name
}

// cgroupPath is a cgroup name as the driver of opts spells it.
func cgroupPath(name []string, opts Options) string {
	if opts.WithDefaults().CgroupDriver == systemdDriver {
		return toSystemd(name)
	}
	return "/" + path.Join(name...)
}

// toSystemd is the kubelet's CgroupName.ToSystemd with runc's ExpandSlice.
func toSystemd(name []string) string {
	parts := make([]string, len(name))
	for i, p := range name {
		parts[i] = strings.ReplaceAll(p, "-", "_")
	}
	var b strings.Builder
	prefix := ""
	for _, p := range parts {
		slice := prefix + p
		b.WriteString("/" + slice + ".slice")
		prefix = slice + "-"
	}
	return b.String()
}

// containerOOMScoreAdjust is the kubelet's GetContainerOOMScoreAdjust.
// memoryCapacity 0 (unknown) scores a burstable container 999.
func containerOOMScoreAdjust(pod *corev1.Pod, c *corev1.Container, memoryCapacity int64) int64 {
	switch model.GetPodQOS(pod) {
	case corev1.PodQOSGuaranteed:
		return guaranteedOOM
	case corev1.PodQOSBestEffort:
		return besteffortOOM
	}
	if memoryCapacity <= 0 {
		return besteffortOOM - 1
	}
	req := c.Resources.Requests.Memory().Value()
	adj := 1000 - (1000*req)/memoryCapacity
	if adj < 1000+guaranteedOOM {
		return 1000 + guaranteedOOM
	}
	if adj == besteffortOOM {
		return adj - 1
	}
	return adj
}

// PodCgroupResources are the values of the kubelet's pod cgroup
// (ResourceConfigForPod); a nil field is left as the runtime made it.
type PodCgroupResources struct {
	CPUShares *uint64
	CPUQuota  *int64
	CPUPeriod *uint64
	Memory    *int64
}

// PodCgroupConfig is the kubelet's ResourceConfigForPod, with pod-level
// resources: CPU shares from the requests, and for a Guaranteed pod the
// CPU quota and memory limit, for a Burstable one each where every
// container (or the pod level) limits it; a BestEffort pod gets the
// minimum shares.
func PodCgroupConfig(pod *corev1.Pod) PodCgroupResources {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	cpuDeclared, memDeclared := true, true
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Resources.Limits.Cpu().IsZero() {
				cpuDeclared = false
			}
			if list[i].Resources.Limits.Memory().IsZero() {
				memDeclared = false
			}
		}
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		if !pod.Spec.Resources.Limits.Cpu().IsZero() {
			cpuDeclared = true
		}
		if !pod.Spec.Resources.Limits.Memory().IsZero() {
			memDeclared = true
		}
	}
	shares := milliCPUToShares(reqs.Cpu().MilliValue())
	quota := milliCPUToQuota(limits.Cpu().MilliValue(), quotaPeriod)
	period := uint64(quotaPeriod)
	memory := limits.Memory().Value()
	switch model.GetPodQOS(pod) {
	case corev1.PodQOSGuaranteed:
		return PodCgroupResources{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &memory}
	case corev1.PodQOSBurstable:
		r := PodCgroupResources{CPUShares: &shares}
		if cpuDeclared {
			r.CPUQuota, r.CPUPeriod = &quota, &period
		}
		if memDeclared {
			r.Memory = &memory
		}
		return r
	}
	minimum := uint64(minShares)
	return PodCgroupResources{CPUShares: &minimum}
}
