// Package stats reads the usage of the node and its pods, the kubelet's
// /stats/summary (reference: kubelet v1.37.2, pkg/kubelet/stats): each
// running container's CPU, memory and writable layer (CRI
// ListContainerStats), and the pod's own through CRI PodSandboxStats or,
// where the runtime has none (containerd 1.6), its pod cgroup and the
// sandbox's network namespace; and the node's own usage, the whole
// machine's, from the root cgroup as cadvisor reads the root container
// for the kubelet. CPU rates come from the runtime, or from two
// cumulative samples; a call that knows no rate yet samples again after a
// second.
package stats
