//go:build robustness

package robustness_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// watchEntry is one change WatchPods sent.
type watchEntry struct {
	rev  int64
	kind string
	uid  string
}

func entryOf(m *podsyncv1.WatchPodsResponse) watchEntry {
	e := watchEntry{rev: m.GetRevision(), uid: m.GetPod().GetUid()}
	switch {
	case m.GetStatus() != nil:
		e.kind = "status"
	case m.GetEvent() != nil:
		e.kind = "event"
	case m.GetDeleted() != nil:
		e.kind = "deleted"
	}
	return e
}

// watchLog follows WatchPods across podsyncd's restarts, resuming from
// the last revision it got, and keeps every change after the first
// synced message.
type watchLog struct {
	mu sync.Mutex
	// listed is set by the first synced message, whose revision is synced.
	listed     bool
	synced     int64
	entries    []watchEntry
	reconnects int
	progress   chan struct{} // closed and replaced on every entry
}

func newWatchLog() *watchLog { return &watchLog{progress: make(chan struct{})} }

func (w *watchLog) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries)
}

func (w *watchLog) last() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.entries); n > 0 {
		return w.entries[n-1].rev
	}
	return w.synced
}

func (w *watchLog) follow(ctx context.Context, c podsyncv1.PodSyncServiceClient) {
	for ctx.Err() == nil {
		since := w.last()
		stream, err := c.WatchPods(ctx, &podsyncv1.WatchPodsRequest{SinceRevision: since}, grpc.WaitForReady(true))
		for err == nil {
			var m *podsyncv1.WatchPodsResponse
			if m, err = stream.Recv(); err != nil {
				break
			}
			w.mu.Lock()
			switch {
			case m.GetSynced() != nil:
				w.listed, w.synced = true, m.GetRevision()
			case !w.listed:
				// The initial list, before synced.
			default:
				w.entries = append(w.entries, entryOf(m))
				close(w.progress)
				w.progress = make(chan struct{})
			}
			w.mu.Unlock()
		}
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		w.reconnects++
		w.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
}

// awaitRevision waits until the watcher got revision rev or later.
func (w *watchLog) awaitRevision(t *testing.T, rev int64) {
	deadline := time.After(time.Minute)
	for {
		w.mu.Lock()
		done := w.listed && (len(w.entries) > 0 && w.entries[len(w.entries)-1].rev >= rev || w.synced >= rev)
		progress := w.progress
		w.mu.Unlock()
		if done {
			return
		}
		select {
		case <-progress:
		case <-deadline:
			t.Fatalf("the watcher did not reach revision %d in a minute (at %d)", rev, w.last())
		}
	}
}

func typesUID(s string) types.UID { return types.UID(s) }
