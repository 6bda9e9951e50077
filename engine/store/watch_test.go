package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsync/podsync/engine/errdefs"
)

func TestWatchLiveAndResume(t *testing.T) {
	s := openTest(t, Options{})
	ctx := testCtx(t)
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	_, rev, err := s.List(Filter{})
	if err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithCancel(ctx)
	w, err := s.Watch(wctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, event(pod, "Pulled"), event(pod, "Created"))
	got := receive(ctx, t, w, 2)
	mustAppend(t, s, event(pod, "Started"))
	got = append(got, receive(ctx, t, w, 1)...)
	if diff := cmp.Diff([]string{"Pulled", "Created", "Started"}, reasons(got)); diff != "" {
		t.Errorf("live entries (-want +got):\n%s", diff)
	}
	cancel()
	if rest := drain(ctx, t, w); len(rest) != 0 {
		t.Errorf("entries after cancel: %v", reasons(rest))
	}
	if !errors.Is(w.Err(), context.Canceled) {
		t.Errorf("Err after cancel: %v, want context.Canceled", w.Err())
	}

	// Changes while nobody watches are delivered on resume, then live ones.
	mustAppend(t, s, event(pod, "Killing"))
	mustPut(t, s, testPod("default", "other", "uid-2")) // a revision without an entry
	mustAppend(t, s, event(pod, "BackOff"))
	w, err = s.Watch(ctx, got[len(got)-1].Revision)
	if err != nil {
		t.Fatal(err)
	}
	resumed := receive(ctx, t, w, 2)
	mustAppend(t, s, event(pod, "Started"))
	resumed = append(resumed, receive(ctx, t, w, 1)...)
	if diff := cmp.Diff([]string{"Killing", "BackOff", "Started"}, reasons(resumed)); diff != "" {
		t.Errorf("resumed entries (-want +got):\n%s", diff)
	}
	if _, err := s.Delete("uid-1"); err != nil {
		t.Fatal(err)
	}
	if e := receive(ctx, t, w, 1)[0]; e.Kind != KindDeleted || e.Pod != RefOf(pod) {
		t.Errorf("after Delete the watcher got %+v", e)
	}
}

// TestWatchCatchUpRace starts watchers from old revisions while entries
// are appended: each sees every entry after its start once, in order,
// across the switch from replay to live.
func TestWatchCatchUpRace(t *testing.T) {
	s := openTest(t, Options{})
	ctx := testCtx(t)
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	for i := range 2*watchBatch + 10 {
		mustAppend(t, s, event(pod, fmt.Sprint("old", i)))
	}
	const more = 200
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range more {
			if _, err := s.Append(event(pod, fmt.Sprint("new", i))); err != nil {
				t.Errorf("Append: %v", err)
				return
			}
		}
	})
	starts := []int64{0, 1, watchBatch, 2 * watchBatch}
	watchers := make([]*Watcher, len(starts))
	for i, since := range starts {
		w, err := s.Watch(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		watchers[i] = w
	}
	wg.Wait()
	all, err := s.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	for i, since := range starts {
		var want []Entry
		for _, e := range all {
			if e.Revision > since {
				want = append(want, e)
			}
		}
		got := receive(ctx, t, watchers[i], len(want))
		if diff := cmp.Diff(revisions(want), revisions(got)); diff != "" {
			t.Errorf("watch from %d (-want +got):\n%s", since, diff)
		}
	}
}

func TestWatchSlowConsumer(t *testing.T) {
	const buffer = 4
	s := openTest(t, Options{WatchBuffer: buffer})
	ctx := testCtx(t)
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	w, err := s.Watch(ctx, s.Revision())
	if err != nil {
		t.Fatal(err)
	}
	// The watcher is live (it had nothing to replay) before it falls
	// behind: a replaying watcher waits for its reader instead.
	waitLive(ctx, t, s, w)
	first := mustAppend(t, s, event(pod, "0"))
	if e := receive(ctx, t, w, 1)[0]; e.Revision != first {
		t.Fatalf("first entry at %d, want %d", e.Revision, first)
	}
	// Nobody reads now; the writer must not wait.
	var revs []int64
	for i := 1; i <= 10; i++ {
		revs = append(revs, mustAppend(t, s, event(pod, fmt.Sprint(i))))
	}
	got := drain(ctx, t, w)
	if diff := cmp.Diff(revs[:buffer], revisions(got)); diff != "" {
		t.Errorf("buffered entries (-want +got):\n%s", diff)
	}
	var sc *errdefs.SlowConsumerError
	if err := w.Err(); !errors.As(err, &sc) || !errors.Is(err, errdefs.ErrSlowConsumer) || sc.LastRevision != revs[buffer-1] {
		t.Fatalf("Err: %v, want a errdefs.SlowConsumerError after revision %d", err, revs[buffer-1])
	}
	// Resuming from the last revision delivered misses nothing.
	w, err = s.Watch(ctx, sc.LastRevision)
	if err != nil {
		t.Fatal(err)
	}
	rest := receive(ctx, t, w, len(revs)-buffer)
	if diff := cmp.Diff(revs[buffer:], revisions(rest)); diff != "" {
		t.Errorf("resumed entries (-want +got):\n%s", diff)
	}
}

func TestWatchErrors(t *testing.T) {
	s := openTest(t, Options{KeepEntries: 2})
	ctx := testCtx(t)
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	for i := range 5 {
		mustAppend(t, s, event(pod, fmt.Sprint(i)))
	}
	var ce *errdefs.CompactedError
	if _, err := s.Watch(ctx, 1); !errors.As(err, &ce) || ce.CompactRevision != s.CompactRevision() {
		t.Errorf("Watch(compacted): %v, want a errdefs.CompactedError at %d", err, s.CompactRevision())
	}
	if _, err := s.Watch(ctx, s.Revision()+1); !errors.Is(err, errdefs.ErrFutureRevision) {
		t.Errorf("Watch(future): %v, want errdefs.ErrFutureRevision", err)
	}
	if _, err := s.Watch(ctx, -1); !errors.Is(err, errdefs.ErrInvalidRecord) {
		t.Errorf("Watch(-1): %v, want errdefs.ErrInvalidRecord", err)
	}
}

// TestWatchCompactedWhileBehind: a watcher that has not read what it must
// replay before that is compacted ends with the compaction point.
func TestWatchCompactedWhileBehind(t *testing.T) {
	s := openTest(t, Options{WatchBuffer: 1})
	ctx := testCtx(t)
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	start := s.Revision()
	for i := range 2*watchBatch + 1 {
		mustAppend(t, s, event(pod, fmt.Sprint(i)))
	}
	w, err := s.Watch(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	// Once the watcher has read its first batch, compact past all of it.
	got := receive(ctx, t, w, 1)
	if err := s.Compact(s.Revision()); err != nil {
		t.Fatal(err)
	}
	got = append(got, drain(ctx, t, w)...)
	var ce *errdefs.CompactedError
	if err := w.Err(); !errors.As(err, &ce) || ce.CompactRevision != s.Revision() {
		t.Fatalf("Err: %v, want a errdefs.CompactedError at %d", err, s.Revision())
	}
	if len(got) == 0 || len(got) > watchBatch || got[0].Revision != start+1 {
		t.Errorf("got %d entries from %v before the error", len(got), revisions(got)[:min(1, len(got))])
	}
}

func TestWatchEndsWithClose(t *testing.T) {
	s, err := Open(t.TempDir()+"/podsync.db", Options{WatchBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	pod := testPod("default", "web", "uid-1")
	start := mustPut(t, s, pod).ModRevision
	live, err := s.Watch(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"A", "B"} {
		mustAppend(t, s, event(pod, reason))
		receive(ctx, t, live, 1)
	}
	// This one is stuck replaying: its buffer of one holds A, B waits.
	stuck, err := s.Watch(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*Watcher{"live": live, "replaying": stuck} {
		drain(ctx, t, w)
		if !errors.Is(w.Err(), errdefs.ErrStoreClosed) {
			t.Errorf("%s watcher: Err %v, want errdefs.ErrStoreClosed", name, w.Err())
		}
	}
}

// waitLive waits until w receives appended entries from publish.
func waitLive(ctx context.Context, t *testing.T, s *Store, w *Watcher) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		_, ok := s.watchers[w]
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("watcher never went live: %v", ctx.Err())
		}
	}
}

// TestIdleWatcherHoldsNoBuffer: a watcher's queue is allocated when
// entries arrive, grows with them up to WatchBuffer, and is let go once
// drained; opening one allocates about a KiB, not a channel of
// WatchBuffer entries (147 KiB with the default of 1024).
func TestIdleWatcherHoldsNoBuffer(t *testing.T) {
	const buffer = 64
	s := openTest(t, Options{WatchBuffer: buffer})
	ctx := testCtx(t)
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)

	var before, after runtime.MemStats
	const n = 50
	ws := make([]*Watcher, 0, n)
	runtime.ReadMemStats(&before)
	for range n {
		w, err := s.Watch(ctx, s.Revision())
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 8<<10 {
		t.Errorf("opening a watcher allocates %d bytes, want under 8 KiB", per)
	}
	w := ws[0]
	waitLive(ctx, t, s, w)
	queueCap := func() int {
		w.qmu.Lock()
		defer w.qmu.Unlock()
		return len(w.q.buf)
	}
	if c := queueCap(); c != 0 {
		t.Fatalf("idle watcher's queue holds %d entries' room, want none", c)
	}
	mustAppend(t, s, event(pod, "one"))
	receive(ctx, t, w, 1)
	waitFor(ctx, t, "the drained queue to be let go", func() bool { return queueCap() == 0 })

	// Unread entries grow the queue up to the buffer, never beyond.
	for i := range buffer - 1 {
		mustAppend(t, s, event(pod, fmt.Sprint(i)))
		if c := queueCap(); c > buffer {
			t.Fatalf("queue of %d entries' room, above WatchBuffer %d", c, buffer)
		}
	}
	got := receive(ctx, t, w, buffer-1)
	if len(got) != buffer-1 {
		t.Fatalf("received %d entries, want %d", len(got), buffer-1)
	}
	waitFor(ctx, t, "the drained queue to be let go", func() bool { return queueCap() == 0 })
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
