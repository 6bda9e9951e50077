// Package engine is the node: it runs Kubernetes Pods on a CRI runtime and
// keeps them converged with the kubelet's semantics (reference: kubelet
// v1.37.2, pkg/kubelet/kubelet.go). Its Node is a small facade that wires
// the rooms below and answers the API; every caller — the server,
// podsync-vk's provider through the SDK, the manifest directory, the
// tests — reaches the engine through it, and names its vocabulary
// (types.go: StepResult, PodRecord, RunPodsRequest, …), never the rooms.
//
// The rooms, each a package that receives what it needs as fields or small
// interfaces it declares itself, and none holding a pointer back to the
// Node:
//
//   - engine/model, the ground floor, and engine/plan, engine/podstatus,
//     engine/criconfig decide, purely: the runtime view, the label codec
//     and spec hash; ComputePodActions; the pod's status; the CRI configs;
//   - engine/syncer acts: one sync pass of a pod against CRI;
//   - engine/podworkers are the kubelet's pod workers: one worker per pod
//     UID runs its passes through the syncer and records statuses and
//     events;
//   - engine/watch notices: CRI events and relists become hints;
//   - engine/store remembers the desired pods, the stored objects and the
//     revision log; engine/prober probes; engine/admit decides admission;
//   - engine/eviction evicts for local storage; engine/sessions streams
//     exec, attach and port-forward; engine/stats reads usage;
//     engine/logs reads and rotates container logs; engine/metrics counts;
//     engine/runpods is RunPods; engine/errdefs is the error taxonomy.
//
// # The node
//
// Apply (node_pods.go) admits a new pod (admission.go: the node's one
// admission gate, which also admits RunPods batches and resizes, and
// preempts for critical pods), stores it first, then runs one pass in the
// pod's turn through its worker. Delete marks the pod deleting and lets
// its worker kill and remove it. ApplyObjects (objects.go) stores
// ConfigMaps and Secrets and kicks the workers of the pods using them.
// Run recovers from the store and the runtime (recovery.go: adopting
// stored pods, removing podsync's objects of pods the node deleted,
// keeping orphans, orphans.go, or adopting them after a lost store,
// adopt.go), then runs the watcher, the prober, the workers, the garbage
// collector, the log rotation and the eviction. Sessions, Stats, Logs and
// Volumes return the rooms that serve those calls.
//
// The node imports the packages above, logx and validation; it never
// imports the API, the server, the client or internal/ (make check-deps).
package engine
