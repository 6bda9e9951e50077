package store

import (
	"os"

	bolt "go.etcd.io/bbolt"
)

// Stats count what the store's writes cost: how many writes there were
// and how many bbolt commits and syncs of the file they took.
type Stats struct {
	// Writes are the writes committed: Put, Append, Delete and the other
	// methods that change the file, one each, also when they share a
	// commit.
	Writes int64
	// Commits are bbolt's write transactions committed.
	Commits int64
	// Syncs are the fdatasync and fsync calls of those commits: bbolt
	// makes two a commit (the pages, then the meta page) and one more
	// when a commit grows the file.
	Syncs int64
}

// Stats returns what the store's writes cost since it was opened.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// countCommit counts a commit of writes; s.mu is held. bbolt grows the
// file, and fsyncs it, when a commit's pages reach past its end (the
// high-water page the commit left, one page more than a snapshot's Size);
// the file's size is read again only then.
func (s *Store) countCommit(writes int) {
	s.stats.Writes += int64(writes)
	s.stats.Commits++
	s.stats.Syncs += 2
	var highWater int64
	_ = s.db.View(func(tx *bolt.Tx) error {
		highWater = tx.Size() + s.pageSize
		return nil
	})
	if highWater > s.fileSize {
		s.stats.Syncs++
		if fi, err := os.Stat(s.path); err == nil {
			s.fileSize = fi.Size()
		}
	}
}
