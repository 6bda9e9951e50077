package engine

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/errdefs"
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
func Admission(node admit.Node, policy admit.Policy) (AdmitFunc, PolicyFunc) {
	admitFn := func(pod *corev1.Pod, others []*corev1.Pod) error {
		if r := admit.Admit(pod, others, node, policy); !r.Admit {
			return &AdmissionError{Result: r}
		}
		return nil
	}
	policyFn := func(pod *corev1.Pod) error {
		if r := admit.CheckPolicy(pod, node, policy); !r.Admit {
			return &AdmissionError{Result: r}
		}
		return nil
	}
	return admitFn, policyFn
}
