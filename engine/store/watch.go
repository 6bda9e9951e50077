package store

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/podsync/podsync/engine/errdefs"
)

// watchBatch is how many entries a catching-up watcher reads per snapshot.
const watchBatch = 256

// Watcher follows the revision log. Receive from Events until it is
// closed, then read the reason from Err.
type Watcher struct {
	ch   chan Entry
	done chan struct{}
	once sync.Once

	mu  sync.Mutex
	err error

	// last is the revision of the last entry sent on ch. The watcher's
	// goroutine owns it while catching up, publish (under Store.mu) once
	// the watcher is live.
	last int64
}

// Events returns the entries, in revision order, each once. It is closed
// when the watcher ends.
func (w *Watcher) Events() <-chan Entry { return w.ch }

// Err returns why the watcher ended once Events is closed, and nil before:
// the context's error; a *errdefs.SlowConsumerError (errdefs.ErrSlowConsumer) when the
// watcher fell behind by more than its buffer; a *errdefs.CompactedError
// (errdefs.ErrCompacted) when the entries it still had to read were compacted
// first; errdefs.ErrStoreClosed when the store was closed.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// finish ends the watcher with err; only the first call counts. Whoever
// may send on ch at that moment calls it, so no send follows the close.
func (w *Watcher) finish(err error) {
	w.once.Do(func() {
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		close(w.ch)
		close(w.done)
	})
}

// Watch follows the revision log from after since: it sends the entries
// already stored, then the ones appended later, without gap or
// repetition, until ctx ends, the store closes, or the watcher falls more
// than Options.WatchBuffer entries behind. It fails at once with a
// *errdefs.CompactedError when since is before the compaction point,
// errdefs.ErrFutureRevision when it is past the store's revision, and errdefs.ErrStoreClosed.
func (s *Store) Watch(ctx context.Context, since int64) (*Watcher, error) {
	if since < 0 {
		return nil, fmt.Errorf("watch from revision %d: %w: negative revision", since, errdefs.ErrInvalidRecord)
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, errdefs.ErrStoreClosed
	case since < s.compact:
		err := &errdefs.CompactedError{Revision: since, CompactRevision: s.compact}
		s.mu.Unlock()
		return nil, err
	case since > s.rev:
		err := fmt.Errorf("watch from revision %d (store revision %d): %w", since, s.rev, errdefs.ErrFutureRevision)
		s.mu.Unlock()
		return nil, err
	}
	w := &Watcher{ch: make(chan Entry, s.opts.WatchBuffer), done: make(chan struct{}), last: since}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.runWatcher(ctx, w, since)
	return w, nil
}

// runWatcher replays the stored entries after pos, joins the live
// watchers once it has read up to the store's revision, and then waits
// for the end.
func (s *Store) runWatcher(ctx context.Context, w *Watcher, pos int64) {
	defer s.wg.Done()
	for live := false; !live; {
		entries, snap, err := s.readLog(pos, watchBatch)
		if err != nil {
			w.finish(err)
			return
		}
		for _, e := range entries {
			select {
			case w.ch <- e:
				w.last = e.Revision
			case <-ctx.Done():
				w.finish(ctx.Err())
				return
			case <-s.closing:
				w.finish(errdefs.ErrStoreClosed)
				return
			}
		}
		if len(entries) == watchBatch {
			pos = w.last
			continue
		}
		pos = snap
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			w.finish(errdefs.ErrStoreClosed)
			return
		case s.rev == pos:
			// Every entry up to s.rev is sent and publish, which runs
			// under s.mu, sends the next ones.
			s.watchers[w] = struct{}{}
			live = true
		}
		s.mu.Unlock()
	}
	select {
	case <-ctx.Done():
		s.mu.Lock()
		if _, ok := s.watchers[w]; ok {
			delete(s.watchers, w)
			w.finish(ctx.Err())
		}
		s.mu.Unlock()
	case <-w.done: // slow consumer or Close
	}
}

// publish sends committed entries to the live watchers without waiting:
// a watcher whose buffer is full is ended as a slow consumer. The caller
// holds s.mu.
func (s *Store) publish(entries []Entry) {
	if len(entries) == 0 {
		return
	}
next:
	for w := range s.watchers {
		for _, e := range entries {
			select {
			case w.ch <- e:
				w.last = e.Revision
			default:
				delete(s.watchers, w)
				w.finish(&errdefs.SlowConsumerError{LastRevision: w.last})
				s.log.Warn("watcher ended as a slow consumer", zap.Int64("revision", w.last),
					zap.Int("watch_buffer", s.opts.WatchBuffer))
				continue next
			}
		}
	}
}
