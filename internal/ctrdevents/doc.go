// Package ctrdevents follows containerd's own event service — the task
// and container events containerd publishes for every namespace — as the
// runtime watcher's hints on a containerd without CRI container events
// (1.6): it implements watch.RuntimeEvents over a gRPC connection to
// containerd's socket, the one CRI is served on, with containerd's API
// types (github.com/containerd/containerd/api) and no more of containerd.
//
// It lives outside engine/ because it speaks gRPC itself; the engine sees
// only the watch.RuntimeEvents interface.
package ctrdevents
