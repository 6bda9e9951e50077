package store

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// idleWatchers is how many idle watchers BenchmarkIdleWatchers opens.
const idleWatchers = 500

// heapInUse returns the heap and goroutine stacks in use after a full
// collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// openIdleWatchers opens n live watchers that receive nothing and
// returns the heap they hold, per watcher; the watchers end with ctx.
func openIdleWatchers(tb testing.TB, ctx context.Context, s *Store, n int) float64 {
	tb.Helper()
	_, rev, err := s.List(Filter{})
	if err != nil {
		tb.Fatal(err)
	}
	before := heapInUse()
	ws := make([]*Watcher, 0, n)
	for range n {
		w, err := s.Watch(ctx, rev)
		if err != nil {
			tb.Fatal(err)
		}
		ws = append(ws, w)
	}
	// Wait until every watcher is live (caught up, in s.watchers).
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		live := len(s.watchers)
		s.mu.Unlock()
		if live == n {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d watchers live", live, n)
		}
		time.Sleep(time.Millisecond)
	}
	per := float64(heapInUse()-before) / float64(n)
	runtime.KeepAlive(ws)
	return per
}

// BenchmarkIdleWatchers measures the heap an idle watcher holds — what
// N WatchPods streams that see no change cost the store — as
// bytes/watcher (B/op and ns/op are those of opening one).
func BenchmarkIdleWatchers(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "podsync.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if _, err := s.Put(PodRecord{Pod: testPod("default", "web", "uid-1")}); err != nil {
		b.Fatal(err)
	}
	var per float64
	for b.Loop() {
		ctx, cancel := context.WithCancel(b.Context())
		per = openIdleWatchers(b, ctx, s, idleWatchers)
		cancel()
	}
	b.ReportMetric(per, "bytes/watcher")
}
