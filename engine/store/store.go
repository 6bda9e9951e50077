package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/failpoint"
)

// Defaults of Options.
const (
	DefaultKeepEntries = 10000
	// DefaultKeepBytes bounds the revision log by the bytes of its
	// entries: 64 MiB, what a watcher resuming from the compaction point
	// reads into memory at most. Entries are statuses, events and
	// deletions, never specs; the entry count alone would let 10,000
	// statuses of pods with many containers and 12 KiB termination
	// messages each (2,000 pods at the record cap) grow the file and a
	// resuming watcher to gigabytes.
	DefaultKeepBytes = 64 << 20
	// DefaultMaxRecordBytes is the per-pod record cap: 1.5 MiB, etcd's
	// default request limit (--max-request-bytes), which bounds a pod a
	// kubelet can be given.
	DefaultMaxRecordBytes = 3 << 19
	DefaultWatchBuffer    = 1024
	DefaultLockTimeout    = time.Second
)

// newerSchemaError is a store of a later podsync's schema.
type newerSchemaError struct{ version int64 }

func (e *newerSchemaError) Error() string {
	return fmt.Sprintf("schema version %d is newer than this podsync's (%d)", e.version, schemaVersion)
}

// schemaVersion is the layout of the buckets below and the encoding of
// their records; Open refuses a file with a newer one. Schema 2 stores pod
// records in protobuf (codec.go), schema 1 stored them as JSON.
const schemaVersion = 2

var (
	bucketMeta  = []byte("meta")
	bucketPods  = []byte("pods")      // uid -> PodRecord (codec.go)
	bucketNames = []byte("pod_names") // namespace \x00 name -> uid
	bucketLog   = []byte("log")       // revision (8 bytes, big endian) -> entry (JSON)
	// bucketDeleted holds the pods Delete removed (uid -> the deletion's
	// revision) until the runtime holds nothing of them: what the node
	// finds of them in the runtime is its own leftovers, not an orphan.
	bucketDeleted = []byte("deleted")

	keySchema  = []byte("schema")
	keyRev     = []byte("revision")
	keyCompact = []byte("compact_revision")
	keyCount   = []byte("log_entries")
	keyBytes   = []byte("log_bytes")
)

// Options configure a Store. The zero value is valid.
type Options struct {
	// KeepEntries is how many revision-log entries are kept; older ones are
	// removed as new ones are appended. Default DefaultKeepEntries.
	KeepEntries int
	// KeepBytes bounds the bytes of the revision log's entries as stored;
	// the oldest entries beyond it are removed as new ones are appended
	// (the newest entry always stays). Default DefaultKeepBytes.
	KeepBytes int64
	// MaxRecordBytes caps a pod's record as stored (the pod with the
	// ConfigMaps and Secrets it refers to): Put refuses a bigger one with
	// an ErrRecordTooLarge. Default DefaultMaxRecordBytes.
	MaxRecordBytes int
	// WatchBuffer is each watcher's buffer, in entries. Default
	// DefaultWatchBuffer.
	WatchBuffer int
	// LockTimeout bounds the wait for the file lock when another process
	// holds the file. Default DefaultLockTimeout.
	LockTimeout time.Duration
	// EventBurst is how many events of one pod and type Append writes
	// before the kubelet's throttle holds them to one every five minutes
	// (their counts go on). Default 25, the kubelet's; negative: no
	// throttle (tests of the log itself).
	EventBurst int
	// Clock stamps records and entries. Default the real clock.
	Clock clock.PassiveClock
	// Logger logs opening, compaction and slow consumers. Default a no-op
	// logger.
	Logger *zap.Logger
}

func (o Options) withDefaults() Options {
	if o.KeepEntries <= 0 {
		o.KeepEntries = DefaultKeepEntries
	}
	if o.KeepBytes <= 0 {
		o.KeepBytes = DefaultKeepBytes
	}
	if o.MaxRecordBytes <= 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = DefaultWatchBuffer
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// Store is the embedded store. Its methods are safe for concurrent use.
type Store struct {
	db    *bolt.DB
	path  string
	opts  Options
	log   *zap.Logger
	clock clock.PassiveClock
	// events correlates the events Append records (events.go).
	events *record.EventCorrelator

	// mu serialises writes with their publication to watchers, so watchers
	// see entries in revision order, and guards the fields below. Reads do
	// not take it: they read a bbolt snapshot.
	mu      sync.Mutex
	rev     int64 // current revision
	compact int64 // compaction point: entries up to it are gone
	count   int64 // entries in the log
	bytes   int64 // bytes of the entries in the log
	groups  int64 // write groups committed (tests see the grouping)
	// stats counts the writes, commits and syncs of the file (Stats);
	// fileSize is the file's size as the last commit left it, to tell
	// the commits that grew it (bbolt fsyncs the file after a grow).
	stats    Stats
	fileSize int64
	pageSize int64
	closed   bool
	watchers map[*Watcher]struct{} // live watchers, fed by publish
	closing  chan struct{}         // closed by Close, ends catching-up watchers
	wg       sync.WaitGroup        // watcher goroutines

	// queue holds the writes waiting for s.mu; whoever takes s.mu commits
	// all of them in one transaction (see update). Guarded by qmu.
	qmu   sync.Mutex
	queue []*writeReq

	// decoded caches the redacted record decoded from each pod's bytes:
	// List and GetByName hand out copies rather than decode again
	// (200 pods: 3 ms and 14k allocations a List).
	decoded *recordCache
	// key is NodeKey's.
	key []byte
}

// Open opens the store at path, creating the file (mode 0600) and its
// directory (mode 0700) when missing. It fails with errdefs.ErrStoreLocked when another
// process holds the file for longer than Options.LockTimeout, and with
// errdefs.ErrStoreCorrupt, saying what it found, when the file is not a
// store or is damaged (see check.go): Open reads all of a file that is
// not empty before it writes to it, and never panics on a corrupt one.
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		if err := checkFile(path, opts); err != nil {
			return nil, err
		}
	}
	var db *bolt.DB
	err := guard(func() error {
		var err error
		db, err = openBolt(path, &bolt.Options{Timeout: opts.LockTimeout})
		return err
	})
	if err != nil {
		return nil, openError(path, err)
	}
	s := &Store{
		db:       db,
		path:     path,
		opts:     opts,
		log:      opts.Logger,
		clock:    opts.Clock,
		events:   newEventCorrelator(opts.Clock, opts.EventBurst),
		watchers: map[*Watcher]struct{}{},
		closing:  make(chan struct{}),
		decoded:  newRecordCache(),
	}
	if err := s.init(); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.pageSize = int64(db.Info().PageSize)
	if fi, err := os.Stat(path); err == nil {
		s.fileSize = fi.Size()
	}
	if s.key, err = loadNodeKey(path); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s.log.Info("store opened", zap.String("path", path), zap.Int64("revision", s.rev),
		zap.Int64("compact_revision", s.compact), zap.Int64("log_entries", s.count))
	return s, nil
}

func openError(path string, err error) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("open store %s: %w (is another podsyncd using this root directory?)", path, errdefs.ErrStoreLocked)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch),
		errors.Is(err, errPanicked):
		return fmt.Errorf("open store %s: %w: %w", path, errdefs.ErrStoreCorrupt, err)
	default:
		return fmt.Errorf("open store %s: %w", path, err)
	}
}

// init enforces the file mode, creates the buckets and loads the counters.
// bbolt panics on some corrupt pages; init turns that into errdefs.ErrStoreCorrupt.
func (s *Store) init() (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("open store %s: %w: %v", s.path, errdefs.ErrStoreCorrupt, r)
		}
	}()
	fi, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	if fi.Mode().Perm() != 0o600 {
		if err := os.Chmod(s.path, 0o600); err != nil {
			return fmt.Errorf("open store: %w", err)
		}
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return fmt.Errorf("open store %s: %w", s.path, err)
		}
		switch v := getInt(meta, keySchema); {
		case v < schemaVersion:
			// New, or of schema 1, whose JSON records still decode: from
			// here on records are written in schema 2's encoding, which
			// a podsync of schema 1 cannot read, and so refuses the file.
			if err := putInt(meta, keySchema, schemaVersion); err != nil {
				return fmt.Errorf("open store %s: %w", s.path, err)
			}
		case v > schemaVersion:
			return fmt.Errorf("open store %s: %w", s.path, &newerSchemaError{version: v})
		}
		for _, b := range [][]byte{bucketPods, bucketNames, bucketLog, bucketDeleted, bucketObjects} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("open store %s: %w", s.path, err)
			}
		}
		s.rev, s.compact, s.count = getInt(meta, keyRev), getInt(meta, keyCompact), getInt(meta, keyCount)
		if meta.Get(keyBytes) == nil {
			// A store written before the log was bounded by bytes: count
			// them once.
			var n int64
			if err := tx.Bucket(bucketLog).ForEach(func(_, v []byte) error { n += int64(len(v)); return nil }); err != nil {
				return fmt.Errorf("open store %s: %w", s.path, err)
			}
			if err := putInt(meta, keyBytes, n); err != nil {
				return fmt.Errorf("open store %s: %w", s.path, err)
			}
		}
		s.bytes = getInt(meta, keyBytes)
		return nil
	})
}

// logBytes returns the bytes of the revision log's entries.
func (s *Store) logBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Path returns the store's file.
func (s *Store) Path() string { return s.path }

// Revision returns the store's current revision.
func (s *Store) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// CompactRevision returns the compaction point: the log holds no entry at
// or before it, and reads from it or later succeed.
func (s *Store) CompactRevision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.compact
}

// Close ends every watcher (Err returns errdefs.ErrStoreClosed), waits for their
// goroutines and closes the file. Later calls of any method return
// errdefs.ErrStoreClosed; Close itself may be called again.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for w := range s.watchers {
		w.finish(errdefs.ErrStoreClosed)
	}
	clear(s.watchers)
	close(s.closing)
	s.mu.Unlock()
	s.wg.Wait()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

// txState is the state of one write transaction: the counters it moves,
// committed to the Store only when the transaction commits, and the
// entries it appended, published after the commit.
type txState struct {
	s       *Store
	now     time.Time
	rev     int64
	compact int64
	count   int64
	bytes   int64
	entries []Entry
}

// bump returns the next revision.
func (st *txState) bump() int64 {
	st.rev++
	return st.rev
}

// writeReq is one write waiting for its transaction.
type writeReq struct {
	fn   func(tx *bolt.Tx, st *txState) error
	done chan error // buffered: the committer never waits
}

// update runs fn in a write transaction, persists the counters, and
// publishes the appended entries to watchers, all under s.mu.
//
// Writes are committed in groups: a write queues itself and takes s.mu;
// whoever holds s.mu commits every queued write, in queue order, in one
// transaction, so concurrent writes (the passes of pods started together)
// share one commit and its two fdatasyncs instead of paying for one each.
// The result is the same as committing the writes one by one in that
// order: if any write of a group fails, the group is rolled back and each
// of its writes runs again in a transaction of its own. A write returns
// only after the transaction that holds it has committed.
func (s *Store) update(fn func(tx *bolt.Tx, st *txState) error) error {
	req := &writeReq{fn: fn, done: make(chan error, 1)}
	s.qmu.Lock()
	s.queue = append(s.queue, req)
	s.qmu.Unlock()

	s.mu.Lock()
	select {
	case err := <-req.done:
		// The holder before committed it.
		s.mu.Unlock()
		return err
	default:
	}
	s.qmu.Lock()
	group := s.queue
	s.queue = nil
	s.qmu.Unlock()
	s.commitGroup(group)
	s.mu.Unlock()
	return <-req.done
}

// commitGroup commits a group of writes and answers each; s.mu is held.
func (s *Store) commitGroup(group []*writeReq) {
	s.groups++
	fns := make([]func(tx *bolt.Tx, st *txState) error, len(group))
	for i, r := range group {
		fns[i] = r.fn
	}
	err := s.commit(fns...)
	if err == nil || len(group) == 1 {
		for _, r := range group {
			r.done <- err
		}
		return
	}
	for _, r := range group {
		r.done <- s.commit(r.fn)
	}
}

// commit runs fns in one write transaction, persists the counters and
// publishes the appended entries; s.mu is held.
func (s *Store) commit(fns ...func(tx *bolt.Tx, st *txState) error) error {
	if s.closed {
		return errdefs.ErrStoreClosed
	}
	failpoint.Inject(failpoint.StoreCommit)
	st := &txState{s: s, now: s.clock.Now(), rev: s.rev, compact: s.compact, count: s.count, bytes: s.bytes}
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, fn := range fns {
			if err := fn(tx, st); err != nil {
				return err
			}
		}
		if err := st.autoCompact(tx); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		for _, kv := range []struct {
			key       []byte
			old, next int64
		}{{keyRev, s.rev, st.rev}, {keyCompact, s.compact, st.compact}, {keyCount, s.count, st.count}, {keyBytes, s.bytes, st.bytes}} {
			if kv.old != kv.next {
				if err := putInt(meta, kv.key, kv.next); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			return errdefs.ErrStoreClosed
		}
		return err
	}
	if st.compact != s.compact {
		s.log.Debug("revision log compacted", zap.Int64("compact_revision", st.compact), zap.Int64("log_entries", st.count),
			zap.Int64("log_bytes", st.bytes))
	}
	s.rev, s.compact, s.count, s.bytes = st.rev, st.compact, st.count, st.bytes
	s.countCommit(len(fns))
	s.publish(st.entries)
	return nil
}

// view runs fn in a read transaction (a consistent snapshot).
func (s *Store) view(fn func(tx *bolt.Tx) error) error {
	err := s.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return errdefs.ErrStoreClosed
	}
	return err
}

func revKey(rev int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(rev))
}

func keyRevision(k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k))
}

func getInt(b *bolt.Bucket, key []byte) int64 {
	v := b.Get(key)
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func putInt(b *bolt.Bucket, key []byte, v int64) error {
	return b.Put(key, binary.BigEndian.AppendUint64(nil, uint64(v)))
}
