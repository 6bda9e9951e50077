// Package runpods is the kubelet's run-once mode done right: admit a batch
// of pods in request order, apply the admitted ones concurrently, and wait
// for each until it reaches its target (running, ready or succeeded),
// fails, or misses its timeout — then report one result per pod.
//
// Progress comes from the node's revision log as status changes are
// recorded, not from polling: the kubelet's run-once slept 1 s, then 2 s,
// … up to 512 s between checks. A pod that misses its timeout is reported
// and left as it is; a caller that goes away stops the waiting, never the
// pods, which the node keeps converged. A failed pod is never reported as
// a success (the kubelet's run-once did that).
package runpods
