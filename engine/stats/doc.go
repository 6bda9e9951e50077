// Package stats reads the usage of the node's pods, the kubelet's
// /stats/summary (reference: kubelet v1.37.2, pkg/kubelet/stats): each
// running container's CPU, memory and writable layer (CRI
// ListContainerStats), and the pod's own through CRI PodSandboxStats or,
// where the runtime has none (containerd 1.6), its pod cgroup and the
// sandbox's network namespace. CPU rates come from the runtime, or from
// two cumulative samples; a call that knows no rate yet samples again
// after a second.
package stats
