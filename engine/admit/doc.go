// Package admit decides whether the node takes a pod, as the kubelet's
// predicate admit handler does (pkg/kubelet/lifecycle/predicate.go), plus
// the operator's policy for dangerous pod features.
//
// Admission is a pure function of the pod, the pods already admitted or
// running, the node's allocatable resources and the policy. A rejection
// carries the kubelet's reason — OutOfpods, OutOfcpu, OutOfmemory,
// OutOfephemeral-storage, NodePorts — or a policy reason (PolicyPrivileged,
// PolicyHostNamespace, PolicyHostPath), with a message; like the kubelet, only
// the first failing check is reported.
package admit
