package plan

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
)

// NetworkModeForPod is the kubelet's NetworkNamespaceForPod.
func NetworkModeForPod(pod *corev1.Pod) runtimeapi.NamespaceMode {
	if pod.Spec.HostNetwork {
		return runtimeapi.NamespaceMode_NODE
	}
	return runtimeapi.NamespaceMode_POD
}

// PodSandboxChanged is the kubelet's PodSandboxChanged
// (pkg/kubelet/kuberuntime/util/util.go): whether a new sandbox is needed,
// with which attempt, and why. A new sandbox is needed when there is none
// (attempt 0), more than one is ready, the newest is not ready, its network
// namespace mode does not match hostNetwork, or a non-host-network sandbox
// has a network status without an IP (one without a network status is
// kept); the newest sandbox is carried as PreviousID but for a network
// namespace change.
//
// NOTE(podsync): a new sandbox's attempt is one more than the highest over
// all the pod's sandboxes, where the kubelet takes the newest's: a stale
// sandbox with a higher attempt would make containerd refuse the reused
// name (README, "Differences from the kubelet"). A kept sandbox reports its
// own attempt, as upstream.
func PodSandboxChanged(pod *corev1.Pod, view *model.RuntimeView) SandboxDecision {
	if len(view.Sandboxes) == 0 {
		return SandboxDecision{Create: true, Reason: SandboxReasonNone,
			Message: "No sandbox for pod can be found. Need to start a new one"}
	}
	ready := 0
	var highest uint32
	for _, s := range view.Sandboxes {
		if s.State == model.SandboxReady {
			ready++
		}
		highest = max(highest, s.Attempt)
	}
	s := view.Sandboxes[0]
	next := highest + 1
	switch {
	case ready > 1:
		return SandboxDecision{Create: true, Attempt: next, PreviousID: s.ID, Reason: SandboxReasonMultipleReady,
			Message: "Multiple sandboxes are ready for Pod. Need to reconcile them"}
	case s.State != model.SandboxReady:
		return SandboxDecision{Create: true, Attempt: next, PreviousID: s.ID, Reason: SandboxReasonNotReady,
			Message: "No ready sandbox for pod can be found. Need to start a new one"}
	case s.NetworkMode != NetworkModeForPod(pod):
		return SandboxDecision{Create: true, Attempt: next, Reason: SandboxReasonNetworkChanged,
			Message: "Sandbox for pod has changed. Need to start a new one"}
	case !pod.Spec.HostNetwork && s.IPs != nil && len(s.IPs) == 0:
		// The kubelet's sandboxStatus.Network != nil && Network.Ip == "".
		return SandboxDecision{Create: true, Attempt: next, PreviousID: s.ID, Reason: SandboxReasonNoIP,
			Message: "Sandbox for pod has no IP address. Need to start a new one"}
	}
	return SandboxDecision{ID: s.ID, Attempt: s.Attempt, Reason: SandboxReasonReady}
}
