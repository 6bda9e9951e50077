//go:build integration

package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/podsync/podsync/engine/watch"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"

	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// nextHint waits for a hint.
func nextHint(t *testing.T, ctx context.Context, hints <-chan types.UID) types.UID {
	t.Helper()
	select {
	case uid, ok := <-hints:
		if !ok {
			t.Fatal("subscription closed")
		}
		return uid
	case <-ctx.Done():
		t.Fatal("no hint")
	}
	return ""
}

// TestWatcherHints: on containerd 2.x hints come from container events
// (the relist is an hour away); on 1.6, which has none, from the relist.
func TestWatcherHints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	res := e.until(pod, "running", e.running(pod))

	w, err := watch.NewWatcher(watch.WatcherOptions{
		Runtime: e.rt, Logger: zaptest.NewLogger(t),
		RelistPeriod: 200 * time.Millisecond, EventedRelistPeriod: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hints := w.Subscribe(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	// The first relist names every pod (other tests' too).
	for nextHint(t, e.ctx, hints) != pod.UID {
	}
	if inst.Flavour() == localcri.Containerd2 {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for !w.EventsStreaming() {
			select {
			case <-tick.C:
			case <-e.ctx.Done():
				t.Fatal("containerd 2.x: no event stream")
			}
		}
	}

	localcritest.Crictl(t, inst, "stop", newest(t, res, "app").ID)
	for nextHint(t, e.ctx, hints) != pod.UID {
	}
	switch inst.Flavour() {
	case localcri.Containerd2:
		if w.EventsReceived() == 0 {
			t.Error("containerd 2.x: the hint did not come from an event")
		}
	case localcri.Containerd16:
		if w.EventsReceived() != 0 {
			t.Errorf("containerd 1.6: %d events; it has none", w.EventsReceived())
		}
	}

	if err := e.s.RemovePod(e.ctx, pod); err != nil {
		t.Fatal(err)
	}
	for nextHint(t, e.ctx, hints) != pod.UID {
	}
}
