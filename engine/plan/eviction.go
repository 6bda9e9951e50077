package plan

import corev1 "k8s.io/api/core/v1"

// ReasonEvicted is the reason of an evicted pod's status and event (the
// kubelet's eviction Reason).
const ReasonEvicted = "Evicted"

// EvictionGracePeriodSeconds is the kubelet's
// immediateEvictionGracePeriodSeconds: the grace period an evicted pod's
// containers are killed with, whatever the pod's own (the minimum of 2 s
// still applies to StopContainer).
const EvictionGracePeriodSeconds = 1

// IsEvicted reports whether pod's status is the kubelet's eviction: phase
// Failed, reason Evicted.
func IsEvicted(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == ReasonEvicted
}
