package engine

import (
	"context"

	"github.com/podsync/podsync/engine/claims"
	"github.com/podsync/podsync/engine/store"
)

// The contract of the node's writes with remote control planes:
// preconditions on a pod's revision and uid, and the lease whose epoch
// fences the writes of a control plane that lost the node (docs/api.md).
type (
	// Lease is the node's lease (engine/store).
	Lease = store.Lease
	// Fence is the lease condition of the writes made under a context
	// (WithFence).
	Fence = store.Fence
	// Precondition is what a pod's write requires of the pod it changes
	// (its revision, as Get returns it, or 0 for "does not exist"; its
	// uid), checked in the write's transaction. The zero value requires
	// nothing.
	Precondition = store.Precondition
	// Leases acquire, renew, release and read the node's lease.
	Leases = store.Leases
)

// WithFence returns ctx carrying the lease condition of the writes made
// under it (store.WithFence): the server puts the caller's there for
// every mutating call.
func WithFence(ctx context.Context, f Fence) context.Context { return store.WithFence(ctx, f) }

// FenceOf returns the fence of ctx, or nil (store.FenceOf).
func FenceOf(ctx context.Context) *Fence { return store.FenceOf(ctx) }

// Named volumes (engine/claims).
type (
	// NamedVolume is a node-local named volume.
	NamedVolume = claims.NamedVolume
	// Volumes are the node's named volumes.
	Volumes = claims.Volumes
)

// Volumes returns the node's named volumes.
func (n *Node) Volumes() *Volumes { return claims.New(n.store, n.cfg.node, n.cfg.log) }

// Leases returns the node's lease, which the store keeps durably with the
// pods.
func (n *Node) Leases() *Leases { return n.store.Leases() }
