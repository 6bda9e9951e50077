package engine

import (
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/syncer"
)

// PolicyFunc checks a pod against the operator's policy on every apply;
// an error refuses the apply.
type PolicyFunc func(pod *corev1.Pod) error

// AdmissionError is a pod the node refuses to run. It matches ErrAdmission
// with errors.Is, and Reason is the kubelet's admission reason (OutOfcpu,
// OutOfmemory, OutOfpods, NodePorts, SysctlForbidden) or a policy reason
// (PodSecurity, PolicyHostPath), which the API reports as its ErrorInfo
// reason.
type AdmissionError struct {
	Result admit.Result
	// Victims are the pods to preempt so that a critical pod refused for
	// resources fits (admit.Preemption); the node preempts them and
	// admits the pod again.
	Victims []*corev1.Pod
}

func (e *AdmissionError) Error() string { return e.Result.Reason + ": " + e.Result.Message }

// Unwrap makes errors.Is(err, ErrAdmission) hold.
func (e *AdmissionError) Unwrap() error { return errdefs.ErrAdmission }

// Reason is the admission reason.
func (e *AdmissionError) Reason() string { return e.Result.Reason }

// Admission returns the NodeOptions hooks for a node with the given
// allocatable resources and policy: Admit admits pods the node does not
// hold yet (policy, pod count, resources, host ports — the kubelet's
// order), Policy re-checks the policy on every apply of a known pod.
//
// Both first set the pod's spec.priority from its priorityClassName
// (admit.ResolvePriority), as the API server does before a pod reaches a
// kubelet: the stored pod carries it, and eviction and preemption rank by
// it. A critical pod refused for resources only is refused with the
// victims whose preemption would admit it (AdmissionError.Victims).
func Admission(node admit.Node, policy admit.Policy) (AdmitFunc, PolicyFunc) {
	admitFn := func(pod *corev1.Pod, others []*corev1.Pod) error {
		if r := admit.ResolvePriority(pod, policy.PriorityClasses); !r.Admit {
			return &AdmissionError{Result: r}
		}
		if victims, r := admit.Preemption(pod, others, node, policy); !r.Admit {
			return &AdmissionError{Result: r, Victims: victims}
		}
		return nil
	}
	policyFn := func(pod *corev1.Pod) error {
		if r := admit.ResolvePriority(pod, policy.PriorityClasses); !r.Admit {
			return &AdmissionError{Result: r}
		}
		if r := admit.CheckPolicy(pod, node, policy); !r.Admit {
			return &AdmissionError{Result: r}
		}
		return nil
	}
	return admitFn, policyFn
}

// admitResize is the node's admission of a known pod's resize, the
// kubelet's allocation manager's canAdmitPod for a resize: the pod with
// its new requests against the other active pods, as a new pod is
// admitted. It returns false with the kubelet's message when the pod does
// not fit ("Node didn't have enough resource: memory, requested: …").
//
// NOTE(podsync): the other pods count with their stored specs; the
// kubelet counts what it allocated, which differs only for another pod
// whose own resize waits.
func (n *Node) admitResize(pod *corev1.Pod) (bool, string) {
	if n.admit == nil {
		return true, ""
	}
	n.admitMu.Lock()
	defer n.admitMu.Unlock()
	active, err := n.activePods()
	if err != nil {
		return false, err.Error()
	}
	others := slices.DeleteFunc(active, func(o *corev1.Pod) bool { return o.UID == pod.UID })
	for uid, r := range n.admitting {
		if uid != pod.UID && !slices.ContainsFunc(others, func(o *corev1.Pod) bool { return o.UID == uid }) {
			others = append(others, r.pod)
		}
	}
	if err := n.admit(pod, others); err != nil {
		var ae *AdmissionError
		if errors.As(err, &ae) {
			return false, ae.Result.Message
		}
		return false, err.Error()
	}
	return true, ""
}

// passStatusOptions are statusOptions with what a pass found of a resize:
// pending (not admitted), or failed (its ResizePodInPlaceError step).
func (n *Node) passStatusOptions(reasons map[string]corev1.ContainerStateWaiting, res syncer.SyncResult) podstatus.StatusOptions {
	o := n.statusOptions(reasons)
	o.ResizePending = res.Plan.ResizePending
	for _, s := range res.Steps {
		if s.Reason == syncer.ReasonResizePodInPlaceError {
			o.ResizeError = s.Message
		}
	}
	return o
}
