// Package plan is the pure planner of a pod sync pass, the kubelet's
// computePodActions without its I/O (reference: kubelet v1.37.2,
// pkg/kubelet/kuberuntime).
//
// It decides only; what it decides from (the runtime view, the label
// codec, the spec hash, QoS, the probe results) is engine/model's. It owns:
//
//   - crash-loop and image-pull back-off (backoff.go), computed from what
//     the runtime holds;
//   - ComputePodActions (plan.go): the sandbox decision (sandbox.go), the
//     containers to kill, the init containers (init.go), sidecars and
//     containers to start, each named with a reason, and the back-offs
//     that hold them;
//   - what ends a pod on the node (terminal.go): its active deadline, its
//     backoff limit, an eviction (eviction.go);
//   - in-place resize (resize.go): the kubelet's computePodResizeAction
//     (a resize action per running container, or a restart under
//     resizePolicy RestartContainer), and what the node allocated while a
//     resize waits for admission (AllocatedPod);
//   - the garbage-collection selection (gcselect.go), which walks a
//     container's instances with the same walk as the crash-loop back-off.
//
// Everything here is a function of its arguments: no I/O, no logging, no
// clock reads, no feature gates. It may import the standard library (but
// os, os/exec, net other than net/netip and net/url, and syscall),
// k8s.io/api, k8s.io/apimachinery, k8s.io/utils, the CRI API types and
// engine/model; never zap, grpc, the store or failpoints (make check-deps
// checks all of it, with everything it imports from this module). The syncer
// (engine/syncer) executes what it decides.
//
// # Differences from the kubelet
//
// The kubelet (since v1.31) hashes only a container's name and image, so a
// changed command, args, env or mounts of a static pod is silently ignored
// (kubernetes issue 136931). podsync specs are mutable by their callers, so
// podsync hashes every field that shapes the created container (see
// model.ContainerHash) and stores the hashed fields in an annotation; a running
// container whose hash changed is killed and restarted, and the plan names
// the fields that changed ("image", "env[FOO]", "volumeMounts[/data]").
// A change of CPU and memory alone is not a definition change but a resize,
// as the kubelet's hash leaves resources out; the crash-loop back-off, too,
// treats instances that differ in resources only as one definition.
// Container-level restart policies of regular containers (KEP-5307) are
// not supported.
package plan
