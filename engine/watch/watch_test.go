package watch_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer/syncertest"
	"github.com/podsync/podsync/engine/watch"
)

// noEvents is a runtime without container events, as containerd 1.6.
type noEvents struct{ *enginetest.FakeRuntime }

func (noEvents) GetContainerEvents(context.Context, chan *runtimeapi.ContainerEventResponse, func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	return status.Error(codes.Unimplemented, "unknown method GetContainerEvents for service runtime.v1.RuntimeService")
}

// startWatcher runs a watcher until the test ends and subscribes to it.
func startWatcher(t *testing.T, opts watch.WatcherOptions) (*watch.Watcher, <-chan types.UID) {
	t.Helper()
	w, err := watch.NewWatcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return w, w.Subscribe(t.Context())
}

// nextUID waits for a hint, stepping clk (if set) whenever something
// waits on it, so that timers fire.
func nextUID(t *testing.T, ch <-chan types.UID, clk *clocktesting.FakeClock, step time.Duration) types.UID {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if clk != nil && clk.HasWaiters() {
			clk.Step(step)
		}
		select {
		case uid, ok := <-ch:
			if !ok {
				t.Fatal("subscription closed")
			}
			return uid
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			t.Fatal("no hint within 10s")
		}
	}
}

func TestWatcherFollowsEvents(t *testing.T) {
	h := syncertest.New(t)
	// Relists never come due: hints must come from events.
	w, hints := startWatcher(t, watch.WatcherOptions{Runtime: h.RT, Clock: clocktesting.NewFakeClock(syncertest.T0), RelistPeriod: time.Hour, EventedRelistPeriod: time.Hour})
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !w.EventsStreaming() {
		select {
		case <-tick.C:
		case <-h.Ctx.Done():
			t.Fatal("no event stream")
		}
	}
	pod := enginetest.Pod()
	res := h.Sync(pod)
	if uid := nextUID(t, hints, nil, 0); uid != pod.UID {
		t.Errorf("hint %q, want %q", uid, pod.UID)
	}
	// A crash is a hint, from its event: hints of the start may still be
	// pending, so wait for one delivered after the crash's event arrived.
	received := w.EventsReceived()
	h.Exit(res, "app", 1)
	for {
		if uid := nextUID(t, hints, nil, 0); uid != pod.UID {
			t.Fatalf("hint %q, want %q", uid, pod.UID)
		}
		if w.EventsReceived() > received {
			break
		}
	}
}

func TestWatcherRelistsWithoutEvents(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	res := h.Sync(pod)
	// The first relist finds the pod.
	clk := clocktesting.NewFakeClock(syncertest.T0)
	w, hints := startWatcher(t, watch.WatcherOptions{Runtime: noEvents{h.RT}, Clock: clk, RelistPeriod: time.Second})
	if uid := nextUID(t, hints, clk, time.Second); uid != pod.UID {
		t.Errorf("hint %q, want %q", uid, pod.UID)
	}
	h.Exit(res, "app", 1)
	if uid := nextUID(t, hints, clk, time.Second); uid != pod.UID {
		t.Errorf("hint %q, want %q", uid, pod.UID)
	}
	if w.EventsReceived() != 0 {
		t.Errorf("%d events from a runtime without events", w.EventsReceived())
	}
	// Objects podsync did not create are no one's business.
	if _, err := h.RT.RunPodSandbox(h.Ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "other", Namespace: "x", Uid: "other"},
		Labels:   map[string]string{model.LabelPodUID: "other"},
	}, ""); err != nil {
		t.Fatal(err)
	}
	// Removing the pod is a change too.
	if err := h.S.RemovePod(h.Ctx, pod); err != nil {
		t.Fatal(err)
	}
	if uid := nextUID(t, hints, clk, time.Second); uid != pod.UID {
		t.Errorf("hint %q, want %q (the unmanaged sandbox gives none)", uid, pod.UID)
	}
}

func TestSubscriptionsEnd(t *testing.T) {
	h := syncertest.New(t)
	w, err := watch.NewWatcher(watch.WatcherOptions{Runtime: h.RT})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sctx, scancel := context.WithCancel(context.Background())
	early := w.Subscribe(sctx)
	late := w.Subscribe(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	scancel()
	for range early {
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for range late {
	}
	if _, ok := <-w.Subscribe(context.Background()); ok {
		t.Error("a subscription after Run ended is open")
	}
	if err := w.Run(context.Background()); err == nil {
		t.Error("a second Run succeeded")
	}
	if _, err := watch.NewWatcher(watch.WatcherOptions{}); err == nil {
		t.Error("a watcher without runtime was built")
	}
}
