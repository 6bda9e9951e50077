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
//
// A live watcher's entries wait in a queue allocated when the first one
// is published, grown as needed up to Options.WatchBuffer entries and
// released once drained, so an idle watcher holds no buffer: the issue
// measured 144 KiB per watcher with a channel of 1024 entries made up
// front. The watcher's goroutine moves them to Events.
type Watcher struct {
	ch   chan Entry // unbuffered; closed by the watcher's goroutine only
	done chan struct{}
	once sync.Once

	mu sync.Mutex
	// end is why the watcher ends (the first finish); err is end once ch
	// is closed.
	end, err error

	// last is the revision of the last entry sent on ch or queued. The
	// watcher's goroutine owns it while catching up, publish (under
	// Store.mu) once the watcher is live.
	last int64

	// q holds the entries published and not yet sent on ch; behind, set
	// by publish, ends the watcher once q is drained.
	qmu    sync.Mutex
	q      queue
	behind error
	max    int
	wake   chan struct{} // capacity 1: q has entries, or behind is set
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

// finish ends the watcher with err; only the first call counts. The
// watcher's goroutine stops sending and closes ch.
func (w *Watcher) finish(err error) {
	w.once.Do(func() {
		w.mu.Lock()
		w.end = err
		w.mu.Unlock()
		close(w.done)
	})
}

// closeEvents closes ch with the reason finish recorded; the watcher's
// goroutine calls it when it returns.
func (w *Watcher) closeEvents() {
	w.mu.Lock()
	w.err = w.end
	w.mu.Unlock()
	close(w.ch)
}

// enqueue queues e for the watcher's goroutine, or reports false when
// max entries wait already. The caller holds Store.mu.
func (w *Watcher) enqueue(e Entry) bool {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if w.q.len() >= w.max {
		return false
	}
	w.q.push(e, w.max)
	w.last = e.Revision
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// fellBehind ends the watcher as a slow consumer once it has sent what is
// queued. The caller holds Store.mu.
func (w *Watcher) fellBehind() {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	w.behind = &errdefs.SlowConsumerError{LastRevision: w.last}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// queue is a FIFO ring of entries that grows from nothing by doubling, up
// to a bound, and lets go of its array when emptied.
type queue struct {
	buf     []Entry
	head, n int
}

func (q *queue) len() int { return q.n }

func (q *queue) push(e Entry, bound int) {
	if q.n == len(q.buf) {
		grown := make([]Entry, min(max(2*len(q.buf), 4), bound))
		for i := range q.n {
			grown[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = e
	q.n++
}

// peek returns the oldest entry.
func (q *queue) peek() (Entry, bool) {
	if q.n == 0 {
		return Entry{}, false
	}
	return q.buf[q.head], true
}

// pop drops the oldest entry; the array goes with the last one.
func (q *queue) pop() {
	q.buf[q.head] = Entry{}
	q.head = (q.head + 1) % len(q.buf)
	if q.n--; q.n == 0 {
		*q = queue{}
	}
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
	w := &Watcher{ch: make(chan Entry), done: make(chan struct{}), last: since,
		max: s.opts.WatchBuffer, wake: make(chan struct{}, 1)}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.runWatcher(ctx, w, since)
	return w, nil
}

// runWatcher replays the stored entries after pos, joins the live
// watchers once it has read up to the store's revision, and then sends
// what publish queues until the end. It alone sends on and closes ch.
func (s *Store) runWatcher(ctx context.Context, w *Watcher, pos int64) {
	defer s.wg.Done()
	defer w.closeEvents()
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
			// under s.mu, queues the next ones.
			s.watchers[w] = struct{}{}
			live = true
		}
		s.mu.Unlock()
	}
	s.sendQueued(ctx, w)
}

// sendQueued sends the entries publish queues for the live watcher w
// until ctx ends, the store closes (Close finishes w), or w fell behind
// and its queue is drained.
func (s *Store) sendQueued(ctx context.Context, w *Watcher) {
	for {
		w.qmu.Lock()
		e, ok := w.q.peek()
		behind := w.behind
		w.qmu.Unlock()
		if !ok && behind != nil {
			w.finish(behind)
			return
		}
		var send chan<- Entry
		if ok {
			send = w.ch
		}
		select {
		case send <- e:
			w.qmu.Lock()
			w.q.pop()
			w.qmu.Unlock()
		case <-w.wake:
		case <-ctx.Done():
			s.mu.Lock()
			delete(s.watchers, w)
			s.mu.Unlock()
			w.qmu.Lock()
			err := w.behind // ended already, whether or not its reader saw the end
			w.qmu.Unlock()
			if err == nil {
				err = ctx.Err()
			}
			w.finish(err)
			return
		case <-w.done: // Close
			return
		}
	}
}

// publish queues committed entries for the live watchers without
// waiting: a watcher with Options.WatchBuffer entries queued already is
// ended as a slow consumer (after it has sent them). The caller holds
// s.mu.
func (s *Store) publish(entries []Entry) {
	if len(entries) == 0 {
		return
	}
next:
	for w := range s.watchers {
		for _, e := range entries {
			if !w.enqueue(e) {
				delete(s.watchers, w)
				w.fellBehind()
				s.log.Warn("watcher ended as a slow consumer", zap.Int64("revision", w.last),
					zap.Int("watch_buffer", s.opts.WatchBuffer))
				continue next
			}
		}
	}
}
