// Package errorinfo is the vocabulary of the google.rpc.ErrorInfo that
// every non-OK status of podsyncd carries: its domain, the reasons clients
// branch on and the keys of its metadata. The server (server/) sends them
// and the Go SDK (client/) reads them; both take them from here, so that a
// reason is spelled in one place. The constants are part of the API
// (proto/podsync/v1/pod_sync_service.proto documents them too) and never
// change.
//
// The admission reasons are the kubelet's ("OutOfcpu", "NodePorts", …) and
// podsync's policy ones ("PodSecurity", …); the engine decides them,
// so they are defined where it does, in engine/admit, and reach the client
// unchanged. IsCapacityReason tells the capacity ones apart.
//
// The package imports nothing of podsync (make check-deps enforces it):
// anything may use it, the SDK's users included.
package errorinfo
