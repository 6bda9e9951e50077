// Package runpods is the kubelet's run-once mode done right: admit a batch
// of pods in request order, apply the admitted ones concurrently, and wait
// for each until it reaches its target (running, ready or succeeded),
// fails, or misses its timeout — then report one result per pod.
//
// The node runs it (engine.Node's RunPods): the admission of the batch is
// the node's gate (AdmitFunc), which admits each pod once and reserves it
// until its apply has stored it; the apply is the node's Apply without a
// second admission (ApplyFunc); the statuses come from the node's
// revision log (Pods). This package imports none of the node.
//
// Progress comes from the node's revision log as status changes are
// recorded, not from polling: the kubelet's run-once slept 1 s, then 2 s,
// … up to 512 s between checks. A pod that misses its timeout is reported
// and left as it is; a caller that goes away stops the waiting, never the
// pods, which the node keeps converged. A failed pod is never reported as
// a success (the kubelet's run-once did that).
//
// A pod fails at once, before its timeout, when it reaches a terminal
// phase or when one of its passes fails with a sync error that is not a
// back-off and will not clear by itself (see terminalFailure: a sandbox
// the runtime refuses, a start refused by the spec or for a ConfigMap,
// Secret, key or Never-pulled image the node does not hold, a failed
// postStart hook of a container that is not restarted). Its result is
// Failed with reason SyncError and the kubelet's run-once message,
// `error syncing pod "NAME_NS(UID)": failed to "ACTION" for "TARGET" with
// REASON: "MESSAGE"`. Back-offs and failures the pod's worker retries (a
// failed pull, a runtime's refusal to create or start a container) keep
// the pod waiting. Either way the pod stays stored and converging.
package runpods
