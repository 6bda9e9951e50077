// Package store is podsync's embedded store: one bbolt file (mode 0600)
// under the daemon's root directory that holds what podsync must not forget
// across a restart.
//
// # Desired pods
//
// A PodRecord is a defaulted *corev1.Pod with the ConfigMaps and Secrets it
// refers to, keyed by UID, with a namespace/name index. Callers Put a pod
// before they change anything in the runtime for it; every write is one
// fsync'd bbolt transaction, so a record that Put returned survives a crash.
// Put stores metadata and spec only: a pod's status is the last one
// appended to the revision log (see below), as with the API server's status
// subresource. A Put that changes nothing writes nothing.
//
// Secret data never leaves the store by accident: Get, GetByName and List
// return records whose Secrets keep their keys but not their values (see
// PodRecord.SecretsRedacted). Only GetWithSecrets returns the data, for
// building the pod's environment and writing its volume files. The file is
// not encrypted; it is protected like the kubelet's and etcd's data by its
// mode (0600) and its directory's (0700 when the store creates it).
//
// # Revisions and the revision log
//
// The store has one revision counter, persisted, so it only increases,
// across restarts too. Every write bumps it: Put and MarkDeleting (which
// change a record's spec), and each change appended to the revision log.
// The log holds what WatchPods streams: status changes and events, which
// callers Append, and deletions, which Delete records in the same
// transaction that removes the pod. Each entry has its own revision, so a
// reader can resume exactly after any entry it has seen; revisions of spec
// writes have no entry, so the revisions in the log may have gaps.
//
// List returns the revision its snapshot was taken at: Since(rev) or
// Watch(ctx, rev) from there misses nothing and repeats nothing. The log is
// bounded: entries beyond the newest Options.KeepEntries are removed in the
// same transaction that adds new ones, and Compact removes entries up to a
// revision. The compaction point is persisted; reading from before it fails
// with a *errdefs.CompactedError (errors.Is(err, errdefs.ErrCompacted)) that carries it.
//
// # Watchers
//
// Watch follows the log live: it first replays the entries after the given
// revision from the file, then switches to entries as they are appended,
// without gap or repetition. Each watcher has a bounded buffer
// (Options.WatchBuffer, default 1024 entries), allocated when entries
// wait for its reader, grown with them and let go once they are read, so
// that an idle watcher holds about 4 KiB (mostly its goroutine's stack).
// Writers never wait for a watcher: one whose buffer is full when an
// entry is appended has its channel closed once it has read the buffer,
// and Err then returns a *errdefs.SlowConsumerError
// (errors.Is(err, errdefs.ErrSlowConsumer)) naming the last revision it was sent,
// from which it can watch again. A watcher's goroutine ends with its
// context or with Close.
package store
