// Package podstatus derives a pod's status from its spec, the runtime view
// (engine/plan) and the probe results, as the kubelet's
// generateAPIPodStatus, getPhase and status manager conditions do
// (reference: kubelet v1.37.2, pkg/kubelet/kubelet_pods.go and
// pkg/kubelet/status).
//
// ComputePodStatus is pure: the time, the node's IPs and the reasons of
// recent start failures (the kubelet's ReasonCache) are arguments. It may
// import what engine/plan may (no os, net, syscall, zap, grpc, store or
// failpoints; make check-deps checks it) and engine/plan itself.
package podstatus
