// Package syncer runs one sync pass of a pod against a CRI runtime, the
// kubelet's SyncPod (reference: kubelet v1.37.2,
// pkg/kubelet/kuberuntime/kuberuntime_manager.go): it reads the pod's
// podsync-owned sandboxes and containers (view.go), plans with
// engine/plan, and executes the plan in the kubelet's order — kill the
// pod or the containers to kill (kill.go: preStop hooks, then
// StopContainer with the rest of the grace period), prepare volumes
// (volumes.go, with the subPath and file writes that never follow a
// planted link, paths.go), create the sandbox, pull images by policy
// (images.go), create and start init containers, sidecars and containers
// and run postStart hooks (hooks.go) — and ends with a per-pod garbage
// collection of what engine/plan selects (gc.go). Every step is reported
// as it finishes (steps.go: StepResult, with the kubelet's action names
// and reasons); passes and steps also go to an Observer (the node's
// metrics), so the syncer knows nothing of metrics.
//
// Runtime and ImageService are the CRI interfaces it drives (the consumer
// owns them); DialRuntime connects them to containerd through
// k8s.io/cri-client. The syncer serves one pass per pod at a time and
// keeps no other state but the image-pull failures the runtime does not
// record; the node's pod workers (engine) decide when passes run.
//
// It may import the pure packages (engine/plan, engine/podstatus,
// engine/criconfig), engine/errdefs, logx, validation/, the CRI API and
// client, zap and engine/failpoint; never the node, the store, the
// server or the API.
package syncer
