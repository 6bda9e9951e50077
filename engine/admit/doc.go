// Package admit decides whether the node takes a pod, as the kubelet's
// admit handlers do (pkg/kubelet/lifecycle/predicate.go, the sysctl
// allowlist of pkg/kubelet/sysctl), plus what an API server's PodSecurity
// admission would decide: the node's Pod Security level, checked with
// k8s.io/pod-security-admission's own checks, and the operator's
// exemptions, each narrowing one check to the values it names.
//
// Admission is a pure function of the pod, the pods already admitted or
// running, the node and the policy. A rejection carries the kubelet's
// reason — OutOfpods, OutOfcpu, OutOfmemory, OutOfephemeral-storage,
// NodePorts, SysctlForbidden — or a policy reason (PodSecurity, naming the
// level, every failing check, its field and the exemption that opens it;
// PolicyHostPath), with a message; like the kubelet, only the first
// failing admission step is reported.
package admit
