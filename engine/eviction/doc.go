// Package eviction is the kubelet's eviction manager for local storage
// (reference: kubelet v1.37.2, pkg/kubelet/eviction): every housekeeping
// period the node's Manager measures each active pod's disk-backed
// emptyDir and configMap volumes, hosts file, and its running containers'
// writable layers (CRI ListContainerStats) and logs (usage.go, the
// kubelet's du), and evicts a pod over an emptyDir sizeLimit or an
// ephemeral-storage limit (localStorageEviction), or, when the store's
// file system runs below its threshold, the pod using the most there
// (storeFsEviction), ranked as the kubelet ranks pods under disk
// pressure. The two decisions are pure functions of a measurement.
//
// An eviction fails the pod in its worker's turn (a Failer: the pod
// workers) with the kubelet's status, reason Evicted and message, and the
// worker's pass then kills it. A preallocated reserve file beside the
// store (reserve.go) is released when recording an eviction finds the
// disk full, so the eviction that frees the space can be stored.
package eviction
