package watch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/syncer/syncertest"
	"github.com/podsync/podsync/engine/watch"
)

// fakeEvents is a RuntimeEvents whose events the test sends; a Follow
// ends when the test breaks it.
type fakeEvents struct {
	events  chan watch.RuntimeEvent
	breaks  chan struct{}
	follows atomic.Int32
}

func newFakeEvents() *fakeEvents {
	return &fakeEvents{events: make(chan watch.RuntimeEvent), breaks: make(chan struct{})}
}

func (f *fakeEvents) Replaces(err error) bool { return status.Code(err) == codes.Unimplemented }

func (f *fakeEvents) Follow(ctx context.Context, connected func(), fn func(watch.RuntimeEvent)) error {
	f.follows.Add(1)
	connected()
	for {
		select {
		case ev := <-f.events:
			fn(ev)
		case <-f.breaks:
			return errors.New("stream broken")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// send hands ev to the watcher's Follow.
func (f *fakeEvents) send(t *testing.T, ev watch.RuntimeEvent) {
	t.Helper()
	select {
	case f.events <- ev:
	case <-time.After(10 * time.Second):
		t.Fatal("no Follow takes events")
	}
}

// startHints runs a watcher until the test ends and subscribes to its
// hints.
func startHints(t *testing.T, opts watch.WatcherOptions) (*watch.Watcher, <-chan watch.Hint) {
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
	return w, w.SubscribeHints(t.Context())
}

// hintFrom waits for a hint about uid with source among its sources,
// passing over others, stepping clk (if set) by 10 ms whenever something
// waits on it.
func hintFrom(t *testing.T, hints <-chan watch.Hint, uid string, source watch.Source, clk *clocktesting.FakeClock) watch.Hint {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if clk != nil && clk.HasWaiters() {
			clk.Step(10 * time.Millisecond)
		}
		select {
		case h, ok := <-hints:
			if !ok {
				t.Fatal("subscription closed")
			}
			if string(h.UID) == uid && h.Sources()&source != 0 {
				return h
			}
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no hint about %s from %s within 10s", uid, source)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWatcherFollowsRuntimeEventsWithoutCRIEvents(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	res := h.Sync(pod)
	src := newFakeEvents()
	// Relists never come due: after the first, hints come from events or
	// the relists they ask for.
	clk := clocktesting.NewFakeClock(syncertest.T0)
	w, hints := startHints(t, watch.WatcherOptions{Runtime: noEvents{h.RT}, Clock: clk,
		RelistPeriod: time.Hour, EventedRelistPeriod: time.Hour, RuntimeEvents: src})
	hintFrom(t, hints, string(pod.UID), watch.SourceRelist, nil)
	waitFor(t, "containerd events streaming", func() bool { return w.EventSource() == watch.SourceContainerdEvents })

	// An exit of a container the relist listed is a hint of its pod from
	// the event, once CRI shows the container exited (containerd sends
	// the event before its CRI plugin has handled it): one a pass that saw
	// the container running has not seen.
	app := syncertest.Newest(t, res, "app")
	src.send(t, watch.RuntimeEvent{ID: app.ID, Type: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT})
	early := time.After(50 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case hint := <-hints:
			if hint.Sources()&watch.SourceContainerdEvents != 0 {
				t.Fatal("the exit's hint came before CRI showed the container exited")
			}
		case <-early:
			waiting = false
		}
	}
	h.Exit(res, "app", 1)
	hint := hintFrom(t, hints, string(pod.UID), watch.SourceContainerdEvents, clk)
	if hint.SeenBy(watch.StatesOf(res.View), 0) {
		t.Error("the exit's hint is seen by the view of the container running")
	}

	// The exit of a container no relist listed yet (another pod's,
	// started since) makes the watcher relist, which finds its pod; the
	// start did not (the pass that started it reads it back).
	other := enginetest.Pod()
	other.Name, other.UID = "other", "uid-other"
	ores := h.Sync(other)
	otherApp := syncertest.Newest(t, ores, "app").ID
	src.send(t, watch.RuntimeEvent{ID: otherApp, Type: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT})
	quiet := time.After(50 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case hint := <-hints:
			if hint.UID == other.UID {
				t.Fatalf("a hint %v for the start of a container no relist listed", hint.Sources())
			}
		case <-quiet:
			waiting = false
		}
	}
	h.Exit(ores, "app", 1)
	src.send(t, watch.RuntimeEvent{ID: otherApp, Type: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT})
	hintFrom(t, hints, string(other.UID), watch.SourceRelist, nil)
	if got := w.EventsReceived(); got != 3 {
		t.Errorf("EventsReceived = %d, want 3", got)
	}
}

func TestWatcherReconnectsRuntimeEvents(t *testing.T) {
	h := syncertest.New(t)
	src := newFakeEvents()
	clk := clocktesting.NewFakeClock(syncertest.T0)
	w, _ := startHints(t, watch.WatcherOptions{Runtime: noEvents{h.RT}, Clock: clk, RuntimeEvents: src})
	waitFor(t, "containerd events streaming", func() bool { return w.EventsStreaming() })
	// A broken stream is followed again after a back-off; meanwhile
	// nothing streams.
	src.breaks <- struct{}{}
	waitFor(t, "stream reopened", func() bool {
		if clk.HasWaiters() {
			clk.Step(time.Second)
		}
		return src.follows.Load() == 2 && w.EventsStreaming()
	})
}

func TestWatcherPrefersCRIEvents(t *testing.T) {
	h := syncertest.New(t)
	src := newFakeEvents()
	pod := enginetest.Pod()
	w, hints := startHints(t, watch.WatcherOptions{Runtime: h.RT, Clock: clocktesting.NewFakeClock(syncertest.T0),
		RelistPeriod: time.Hour, EventedRelistPeriod: time.Hour, RuntimeEvents: src})
	waitFor(t, "CRI events streaming", func() bool { return w.EventSource() == watch.SourceCRIEvents })
	h.Sync(pod)
	hintFrom(t, hints, string(pod.UID), watch.SourceCRIEvents, nil)
	if n := src.follows.Load(); n != 0 {
		t.Errorf("runtime events followed %d times while CRI events stream", n)
	}
}
