// Package metrics are the engine's Prometheus metrics (docs/metrics.md):
// sync passes and their steps, which the syncer reports as its Observer;
// passes the pod workers skip or the runtime's hints wake; evictions; the
// node's pods by phase, containers in back-off, orphans and pods' local
// storage, read at scrape time from the running node (NodeState); and CRI
// calls, timed by wrapping the runtime and the image service
// (InstrumentRuntime, InstrumentImages). A nil *Metrics records nothing.
package metrics
