package podworkers

import "fmt"

// lifecycle is where a pod is in its life on the node: the states the
// kubelet's pod workers track (pkg/kubelet/pod_workers.go: SyncPod,
// SyncTerminatingPod, SyncTerminatedPod, then the worker's removal). A
// pod's worker owns its state; every pass starts by finding the state the
// store (and, for a terminal pod, the runtime) puts the pod in, enters it,
// and runs that state's pass.
type lifecycle uint8

const (
	// syncing: the pod is to run as its spec says; a pass converges it
	// (and kills what still runs of a pod whose phase just became
	// terminal).
	syncing lifecycle = iota
	// terminating: the pod is marked deleting; a pass kills it within its
	// grace period, removes what the runtime and the node's directories
	// hold for it and then its record.
	terminating
	// terminated: the pod's phase is terminal (Succeeded or Failed) and
	// nothing of it runs; a pass does nothing until it is deleted.
	terminated
	// removed: the pod is gone from the store and the runtime; the
	// worker is retired and runs no more passes.
	removed
)

func (l lifecycle) String() string {
	switch l {
	case syncing:
		return "syncing"
	case terminating:
		return "terminating"
	case terminated:
		return "terminated"
	case removed:
		return "removed"
	}
	return fmt.Sprintf("lifecycle(%d)", uint8(l))
}

// canEnter reports whether a pod in state l may move to next. A deletion
// is final (the store refuses to apply a pod marked deleting) and so is a
// removal; a terminal phase is final too, but a pod whose stored status
// is replaced (a new spec of the same UID applied after the pod ended
// keeps its status) is synced again, as before.
func (l lifecycle) canEnter(next lifecycle) bool {
	switch l {
	case terminating:
		return next == terminating || next == removed
	case removed:
		return next == removed
	}
	return true
}
