package errdefs

import (
	"errors"
	"fmt"
	"time"
)

// Errors of the store (engine/store). The first four are of the classes
// above, so whoever maps a class maps them; the others are the store's
// own and the server maps them by name.
var (
	// ErrPodNotFound reports that no pod has the UID or name asked for.
	// It is an ErrNotFound.
	ErrPodNotFound error = &classError{"pod not found", ErrNotFound}
	// ErrPodExists reports a Put of a pod whose namespace/name is held by
	// a pod with another UID. It is an ErrAlreadyExists.
	ErrPodExists error = &classError{"pod already exists", ErrAlreadyExists}
	// ErrPodDeleting reports a Put of a pod that is being deleted. It is
	// an ErrTerminating.
	ErrPodDeleting error = &classError{"pod is being deleted", ErrTerminating}
	// ErrInvalidRecord reports an argument the store cannot accept: a pod
	// without UID, namespace or name, a changed namespace/name for a
	// stored UID, or a change that is not a status or an event. It is an
	// ErrInvalidSpec.
	ErrInvalidRecord error = &classError{"invalid argument", ErrInvalidSpec}
	// ErrRecordTooLarge reports a Put of a pod whose record (the pod with
	// the ConfigMaps and Secrets it refers to, as stored) is over the
	// store's per-record cap. It is an ErrInvalidSpec: the pod is too big
	// whatever the node's state, as etcd's "request is too large" is
	// InvalidArgument; the error's chain holds a *field.Error naming the
	// size and the cap.
	ErrRecordTooLarge error = &classError{"pod record too large", ErrInvalidSpec}
	// ErrObjectNotFound reports that no ConfigMap or Secret of the kind,
	// namespace and name asked for is stored. It is an ErrNotFound.
	ErrObjectNotFound error = &classError{"object not found", ErrNotFound}
	// ErrCompacted reports a read of the revision log from a revision older
	// than the compaction point. The error is a *CompactedError.
	ErrCompacted = errors.New("revision compacted")
	// ErrFutureRevision reports a revision greater than the store's.
	ErrFutureRevision = errors.New("revision is newer than the store's")
	// ErrSlowConsumer ends a watcher that fell behind by more than its
	// buffer. The error is a *SlowConsumerError.
	ErrSlowConsumer = errors.New("slow consumer")
	// ErrStoreClosed reports use of a closed store.
	ErrStoreClosed = errors.New("store closed")
	// ErrStoreLocked reports that another process holds the store's file.
	ErrStoreLocked = errors.New("store file is locked by another process")
	// ErrStoreCorrupt reports a store file that is not a valid store.
	ErrStoreCorrupt = errors.New("store file is corrupt")
	// ErrStoreLost reports a store with no history (new, emptied or
	// replaced) on a runtime that holds podsync's pods: the node refuses
	// to start rather than take them for orphans and remove them.
	ErrStoreLost = errors.New("the store holds none of the pods podsync runs on this runtime")
)

// classError is an error of its own text that is also of a class:
// "get pod a/b: pod not found", not "not found: get pod a/b: …".
type classError struct {
	msg   string
	class error
}

func (e *classError) Error() string { return e.msg }

// Unwrap returns the class.
func (e *classError) Unwrap() error { return e.class }

// CompactedError is the error of a read from a compacted revision.
type CompactedError struct {
	// Revision is the revision asked for.
	Revision int64
	// CompactRevision is the compaction point: reads from it or later
	// succeed.
	CompactRevision int64
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("revision %d compacted: history is kept after revision %d", e.Revision, e.CompactRevision)
}

// Unwrap returns ErrCompacted.
func (e *CompactedError) Unwrap() error { return ErrCompacted }

// SlowConsumerError ends a watcher whose buffer was full.
type SlowConsumerError struct {
	// LastRevision is the revision of the last entry the watcher was sent;
	// watching again from it misses nothing.
	LastRevision int64
}

func (e *SlowConsumerError) Error() string {
	return fmt.Sprintf("slow consumer: watch buffer full; resume after revision %d", e.LastRevision)
}

// Unwrap returns ErrSlowConsumer.
func (e *SlowConsumerError) Unwrap() error { return ErrSlowConsumer }

// ErrPreconditionFailed reports a write whose precondition (a revision, a
// uid, "does not exist") does not hold: nothing was changed. The error is
// a *PreconditionError.
var ErrPreconditionFailed = errors.New("precondition failed")

// PreconditionKind says which part of a precondition failed.
type PreconditionKind int

const (
	// RevisionMismatch: the pod or object is not at the revision asked
	// for (or exists where it must not, or does not where it must).
	RevisionMismatch PreconditionKind = iota + 1
	// UIDMismatch: the pod is another incarnation than the uid asked for,
	// or does not exist.
	UIDMismatch
)

// PreconditionError is the error of a failed precondition: what was asked
// for and what the store holds.
type PreconditionError struct {
	// Kind is which check failed.
	Kind PreconditionKind
	// What names the pod or object, such as "pod default/web".
	What string
	// Revision is the current revision of the pod or object, 0 when it
	// does not exist.
	Revision int64
	// UID is the current uid of the pod, empty when there is none (or for
	// an object).
	UID string
	// Exists says that a thing without revisions (a named volume) exists.
	Exists bool
	// Want is what the precondition asked for, as text ("revision 12",
	// "uid 1234", "does not exist").
	Want string
}

func (e *PreconditionError) Error() string {
	have := "does not exist"
	if e.Exists {
		have = "exists"
	}
	if e.Revision != 0 {
		have = fmt.Sprintf("is at revision %d", e.Revision)
		if e.UID != "" {
			have += " with uid " + e.UID
		}
	}
	return fmt.Sprintf("%s %s, not %s: precondition failed; read it again and retry", e.What, have, e.Want)
}

// Unwrap returns ErrPreconditionFailed.
func (e *PreconditionError) Unwrap() error { return ErrPreconditionFailed }

// Errors of the node's lease (the fencing of remote control planes).
var (
	// ErrLeaseSuperseded reports a write carrying an epoch older than the
	// node's lease, or a lease call of an epoch that is not the current
	// one. The error is a *LeaseError.
	ErrLeaseSuperseded = errors.New("lease superseded")
	// ErrLeaseRequired reports a write without the current epoch of a
	// held lease on a node that requires one. The error is a *LeaseError.
	ErrLeaseRequired = errors.New("lease required")
	// ErrLeaseHeld reports an acquisition of a lease another identity
	// holds and that has not expired. The error is a *LeaseError.
	ErrLeaseHeld = errors.New("lease held by another identity")
)

// LeaseError is the error of a refused write or lease call: its class
// (ErrLeaseSuperseded, ErrLeaseRequired, ErrLeaseHeld) and the lease as
// it is.
type LeaseError struct {
	// Class is the error's class.
	Class error
	// Epoch is the epoch the call carried, 0 for none.
	Epoch int64
	// Current is the node's current epoch, Holder its holder ("" when
	// released) and Expires its expiry.
	Current int64
	Holder  string
	Expires time.Time
}

func (e *LeaseError) Error() string {
	switch {
	case errors.Is(e.Class, ErrLeaseHeld):
		return fmt.Sprintf("the node's lease is held by %s (epoch %d) until %s", e.Holder, e.Current, e.Expires.UTC().Format(time.RFC3339))
	case errors.Is(e.Class, ErrLeaseRequired):
		if e.Epoch == 0 {
			return fmt.Sprintf("the node requires a lease: the call carries no epoch (current epoch %d, holder %q); acquire the lease", e.Current, e.Holder)
		}
		return fmt.Sprintf("the node requires a held lease: epoch %d is not one (current epoch %d, holder %q); acquire the lease", e.Epoch, e.Current, e.Holder)
	}
	return fmt.Sprintf("lease epoch %d is superseded by epoch %d (holder %q): another control plane drives the node", e.Epoch, e.Current, e.Holder)
}

// Unwrap returns the class.
func (e *LeaseError) Unwrap() error { return e.Class }
