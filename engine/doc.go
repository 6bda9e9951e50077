// Package engine is the node: it runs Kubernetes Pods on a CRI runtime and
// keeps them converged with the kubelet's semantics (reference: kubelet
// v1.37.2, pkg/kubelet/pod_workers.go, pkg/kubelet/kubelet.go). It is the
// kubelet's pod workers, PLEG and probe manager on top of the packages
// that decide and act:
//
//   - engine/plan, engine/podstatus and engine/criconfig decide, purely:
//     the runtime view and ComputePodActions, the pod's status, the CRI
//     configs;
//   - engine/syncer acts: one sync pass of a pod against CRI;
//   - engine/watch notices: CRI events and relists become hints;
//   - engine/store remembers the desired pods and the revision log,
//     engine/prober probes, engine/admit admits, engine/logs reads logs,
//     engine/runpods is RunPods, engine/errdefs is the error taxonomy.
//
// # The node
//
// A Node (node.go) holds one worker per pod UID (worker.go). A worker owns
// what a pod's passes share: its one lock (held for one pass, never across
// waits, so a second caller waits while its context allows), its retry
// timer and failure delay, the kubelet's ReasonCache of start failures, the
// back-off events it has reported, the failed image pulls the runtime does
// not record, and the pod's lifecycle state (lifecycle.go): syncing,
// terminating (marked deleting), terminated (a terminal phase with nothing
// running) or removed. Each pass (worker_pass.go) finds the state the store
// and the runtime put the pod in and runs that state's pass through a
// PodSyncer (the syncer's Syncer, or a scripted one in tests).
//
// Apply (node_pods.go) stores the desired pod first, then runs one pass in
// the pod's turn. The worker also runs a pass when the runtime watcher
// names the pod with a change its last pass did not see, when a back-off or
// retry timer fires, or when a probe result changes. After each pass the
// node feeds the running containers to the prober, computes the status and
// appends it to the revision log if it changed, with Kubernetes-like events
// derived from the steps (worker_events.go). Delete marks the pod deleting,
// kills it within its grace period, removes its CRI objects and directories
// and then its record. Run recovers from the store and the runtime
// (recovery.go: adopting stored pods, removing podsync's objects of pods the
// store does not hold, finishing interrupted deletions), collects garbage
// and rotates container logs (rotate.go). Metrics (metrics.go) observe the
// syncer's passes and the workers' pods.
//
// The node imports the packages above, the store, logx and validation; it
// never imports the API, the server, the client or internal/ packages but
// engine/failpoint (make check-deps).
package engine
