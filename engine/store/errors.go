package store

import (
	"errors"
	"fmt"
)

// Errors of the store, tested with errors.Is. The engine maps them to its
// own classes (engine/errors.go).
var (
	// ErrNotFound reports that no pod has the UID or name asked for.
	ErrNotFound = errors.New("pod not found")
	// ErrAlreadyExists reports a Put of a pod whose namespace/name is held
	// by a pod with another UID.
	ErrAlreadyExists = errors.New("pod already exists")
	// ErrInvalid reports an argument the store cannot accept: a pod without
	// UID, namespace or name, a changed namespace/name for a stored UID, or
	// a change that is not a status or an event.
	ErrInvalid = errors.New("invalid argument")
	// ErrDeleting reports a Put of a pod that is being deleted.
	ErrDeleting = errors.New("pod is being deleted")
	// ErrCompacted reports a read of the revision log from a revision older
	// than the compaction point. The error is a *CompactedError.
	ErrCompacted = errors.New("revision compacted")
	// ErrFutureRevision reports a revision greater than the store's.
	ErrFutureRevision = errors.New("revision is newer than the store's")
	// ErrSlowConsumer ends a watcher that fell behind by more than its
	// buffer. The error is a *SlowConsumerError.
	ErrSlowConsumer = errors.New("slow consumer")
	// ErrClosed reports use of a closed store.
	ErrClosed = errors.New("store closed")
	// ErrLocked reports that another process holds the store's file.
	ErrLocked = errors.New("store file is locked by another process")
	// ErrCorrupt reports a store file that is not a valid store.
	ErrCorrupt = errors.New("store file is corrupt")
)

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
