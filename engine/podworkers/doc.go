// Package podworkers is the kubelet's pod workers for podsync's node
// (reference: kubelet v1.37.2, pkg/kubelet/pod_workers.go): one logical
// worker per pod UID, which runs the pod's sync passes through a small
// PodSyncer (engine/syncer's Syncer, or a scripted one in tests).
//
// A worker (worker.go) owns what a pod's passes share: its one lock (held
// for one pass, never across waits, so a second caller waits while its
// context allows), its retry timer and failure delay, the kubelet's
// ReasonCache of start failures, the back-off events it has reported, the
// failed image pulls the runtime does not record, and the pod's lifecycle
// state (lifecycle.go): syncing, terminating (marked deleting), terminated
// (a terminal phase with nothing running) or removed. As the kubelet's
// podSyncStatus, a worker holds no pointer back to the Workers: the
// Workers' methods take the worker.
//
// Each pass (pass.go) finds the state the store and the runtime put the
// pod in and runs that state's pass: SyncPod, then the prober, the status
// and the events derived from the steps (events.go); the deletion; the
// removal of what the runtime holds of a pod the store does not hold (or
// keeping it as an orphan, as the node's Unstored says). A worker runs a
// pass when Apply or Terminate asks, when the runtime watcher hints at a
// change its last pass did not see (DispatchHints), when a back-off or
// retry timer fires, when a probe result changes (ConsumeProbes), or when
// another pod's change may admit its pending resize (resize.go). FailPod
// fails a pod for the node (an eviction, a preemption) in its turn.
//
// What the workers need of the rest of the node comes in Options: the
// store, the syncer, the prober, the clock, the metrics, and two views the
// node owns, Admission (resizes) and Unstored (orphans), as small
// interfaces this package declares.
package podworkers
