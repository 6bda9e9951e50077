// Package engine runs Kubernetes Pods on a CRI runtime with the kubelet's
// semantics (reference: kubelet v1.37.2, pkg/kubelet/kuberuntime and
// pkg/kubelet/kubelet_pods.go).
//
// The engine is split, like the kubelet's SyncPod, into a planner and an
// executor, but unlike the kubelet the planner is a pure function:
//
//   - ComputePodActions (plan.go) takes the desired *corev1.Pod, the
//     runtime's view of the pod (RuntimeView: every sandbox and container
//     instance, newest first, decoded from CRI statuses by NewRuntimeView),
//     probe results, the current time and a back-off policy, and returns
//     PodActions: which sandbox to create or kill, which containers to kill
//     and start, each named (never indexed) and with a reason and message.
//   - ComputePodStatus (status.go) derives the pod's status (phase,
//     conditions, container statuses) from the same inputs, with the
//     kubelet's getPhase and status generation rules.
//   - SandboxConfig and ContainerConfig (config.go) build the CRI configs as
//     the kubelet's generatePodSandboxConfig and generateContainerConfig do.
//
// None of these does I/O, logs, or reads feature gates; everything they
// need is an argument. Whatever a restart of podsync needs to recover (the
// pod a CRI object belongs to, a container's restart count, its spec hash
// and hashed spec) lives in CRI labels and annotations, encoded and decoded
// in pairs in labels.go. Crash-loop and image-pull back-off (backoff.go) are
// pure functions of what the runtime holds, so they survive a restart too.
//
// # Executing plans
//
// A Syncer (sync.go) runs one sync pass of a pod at a time, the kubelet's
// SyncPod: it reads the runtime's view of the pod (view.go: the pod's
// podsync-owned sandboxes and containers, found by label, with their
// termination messages), plans, and executes the plan through the CRI
// Runtime and ImageService in the kubelet's order — kill the pod (preStop
// hooks, then StopContainer with the rest of the grace period; regular
// containers in parallel, then sidecars in reverse; then every sandbox) or
// the containers to kill; prepare volumes; create the sandbox; start init
// containers one at a time, sidecars and regular containers (image pull
// by policy, CreateContainer, StartContainer, postStart hook). Every step
// is reported as it finishes (StepResult) with the kubelet's action names
// and failure reasons (ErrImagePull, CreateContainerConfigError,
// RunContainerError, …); back-offs are steps with a next retry time, not
// errors. A pass ends with a per-pod garbage collection that removes the
// dead instances and empty stopped sandboxes no status or back-off needs,
// so whatever an interrupted pass leaves is finished or removed by the
// next. SyncPod expects a pod defaulted as the API server does
// (convert.Default).
//
// A Watcher (watch.go) turns the runtime's activity into "this pod may have
// changed" hints for pod workers: CRI container events where the runtime
// streams them (containerd 2.x), and a periodic relist as the authority
// (alone on containerd 1.6, which has no events). A Node's workers skip the
// pass a hint asks for when their last clean pass's final view already
// shows the change and a pass over that view would do nothing (hints.go).
//
// # Keeping pods converged
//
// A Node (node.go, worker.go, recovery.go, events.go, rotate.go) is the
// kubelet's pod workers, PLEG and probe manager on top of a Syncer, a
// Watcher, the embedded store (engine/store) and the prober
// (engine/prober). Apply stores the desired pod first, then runs one pass
// in the pod's turn: every pod UID has one logical worker whose lock is
// held for one pass, never across waits, so a second caller waits while
// its context allows. The worker runs a pass when the runtime watcher
// names the pod, a back-off or retry timer fires, or a probe result
// changes. After each pass the node feeds the running containers to the
// prober, computes the status (with a per-container reason cache, the
// kubelet's ReasonCache, passed as StatusOptions.StartFailures) and
// appends it to the revision log if it changed, with Kubernetes-like
// events derived from the steps. Terminal pods are synced only while
// something of theirs runs. Delete marks the pod deleting, kills it within
// its grace period, removes its CRI objects and directories and then its
// record. Run recovers from the store and the runtime (adopting stored
// pods, removing podsync's objects of pods the store does not hold,
// finishing interrupted deletions), collects garbage and rotates container
// logs through CRI ReopenContainerLog.
//
// # Differences from the kubelet
//
// The kubelet (since v1.31) hashes only a container's name and image, so a
// changed command, args, env or mounts of a static pod is silently ignored
// (kubernetes issue 136931). podsync specs are mutable by their callers, so
// podsync hashes every field that shapes the created container (see
// ContainerHash) and stores the hashed fields in an annotation; a running
// container whose hash changed is killed and restarted, and the plan names
// the fields that changed ("image", "env[FOO]", "volumeMounts[/data]").
//
// Smaller differences, all for determinism or because podsync has no API
// server: environment variables are ordered (envFrom sources in order, keys
// sorted within a source, then env in declaration order) where the kubelet
// ranges over a map; merged DNS options are sorted; the termination-log file
// of a container is named after its restart count instead of a random
// number; container-level restart policies of regular containers (KEP-5307)
// are not supported; the host's resolv.conf is passed in Options rather than
// read.
package engine
