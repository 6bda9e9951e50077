package errdefs

import (
	"errors"
	"fmt"
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
	// ErrStaleVersion reports a write of a stored object whose
	// resourceVersion precondition is not the stored version (If-Match).
	// It is an ErrConflict.
	ErrStaleVersion error = &classError{"resource version is stale", ErrConflict}
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
