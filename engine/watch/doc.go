// Package watch turns a CRI runtime's activity into hints that a pod may
// have changed, the kubelet's PLEG (reference: kubelet v1.37.2,
// pkg/kubelet/pleg): CRI container events where the runtime streams them
// (containerd 2.x, the evented PLEG), the runtime's own events where it
// does not (containerd 1.6: its event service, through RuntimeEvents),
// and a periodic relist as the authority (the generic PLEG). A hint says what
// changed — the event, or the relist's snapshot of the pod's objects
// (hints.go) — so that a pod worker can skip the pass a hint asks for when
// its last clean pass already saw the change.
//
// It drives the runtime through its own small interface and may import
// engine/plan (the CRI state decoders), logx, the CRI API and zap; never
// the node, the syncer, the store, the server or the API.
package watch
