package enginetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func testEvents(t *testing.T, h *Harness) {
	sub := subscribeEvents(h)
	defer func() { _ = sub.stop() }()

	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	if !sub.waitLive(t, h, pod, cfg) {
		return
	}

	id := h.Run(pod, cfg, h.ContainerConfig("app", 0, "/bin/sh", "-c", TermScript))
	h.WaitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := h.RT.StopContainer(h.Ctx, id, 30); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if err := h.RT.RemoveContainer(h.Ctx, id); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	want := []runtimeapi.ContainerEventType{
		runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT,
	}
	got := sub.collect(t, h, id, pod, want)
	// The stop and the deletion may come in either order: containerd
	// lets StopContainer return before it sends the stop
	// (handleContainerExit: cntr.Stop(), then the event), so the
	// RemoveContainer that follows can send its deletion first. The
	// watcher needs each event, not their order: a hint is checked
	// against the runtime's state read after it (watch.objectEvent).
	ended := slices.Clone(got[2:])
	slices.Sort(ended)
	if !slices.Equal(got[:2], want[:2]) || !slices.Equal(ended, want[2:]) {
		t.Errorf("events = %v, want %v (the last two in either order)", got, want)
	}
	if err := sub.stop(); status.Code(err) != codes.Canceled {
		t.Errorf("GetContainerEvents after cancel: %v, want Canceled", err)
	}
}

// eventSubscription is a GetContainerEvents call that a row runs in the
// background.
type eventSubscription struct {
	events chan *runtimeapi.ContainerEventResponse
	result chan error // receives what the call returns
	cancel context.CancelFunc
	ended  bool // the call's result was taken, or stop was called
}

// subscribeEvents starts a GetContainerEvents call on h's runtime.
func subscribeEvents(h *Harness) *eventSubscription {
	ctx, cancel := context.WithCancel(h.Ctx)
	s := &eventSubscription{
		events: make(chan *runtimeapi.ContainerEventResponse, 256),
		result: make(chan error, 1),
		cancel: cancel,
	}
	go func() {
		s.result <- h.RT.GetContainerEvents(ctx, s.events, nil)
	}()
	return s
}

// stop cancels the call and returns what it returned; once the call has
// ended (or stop was called) it returns nil.
func (s *eventSubscription) stop() error {
	if s.ended {
		return nil
	}
	s.ended = true
	s.cancel()
	// The client sends into events without watching ctx: drain until
	// the call returns.
	for {
		select {
		case err := <-s.result:
			return err
		case <-s.events:
		}
	}
}

// waitLive returns once the subscription has delivered an event of a probe
// container in pod: it is then live, so no event of the checked sequence
// can be missed. The stream may start after a probe's events were sent, so
// another probe starts every 500 ms until one is seen. It returns false,
// and logs why, when the runtime has no container events (Unimplemented).
func (s *eventSubscription) waitLive(t *testing.T, h *Harness, pod string, cfg *runtimeapi.PodSandboxConfig) bool {
	t.Helper()
	probes := map[string]bool{}
	newProbe := func() {
		probes[h.Run(pod, cfg, h.ContainerConfig(fmt.Sprintf("probe-%d", len(probes)), 0, "/bin/sh", "-c", "exit 0"))] = true
	}
	newProbe()
	retry := time.NewTicker(500 * time.Millisecond)
	defer retry.Stop()
	for {
		select {
		case ev := <-s.events:
			if probes[ev.ContainerId] {
				return true
			}
		case <-retry.C:
			newProbe()
		case err := <-s.result:
			s.ended = true
			if status.Code(err) == codes.Unimplemented {
				t.Logf("runtime has no container events: %v", err)
				return false
			}
			t.Fatalf("GetContainerEvents: %v", err)
		case <-h.Ctx.Done():
			t.Fatalf("no event for the probe container: %v", h.Ctx.Err())
		}
	}
}

// collect returns the types of the next len(want) events about container
// id, and checks that each has a time and, but for the deletion, names
// sandbox pod.
func (s *eventSubscription) collect(t *testing.T, h *Harness, id, pod string, want []runtimeapi.ContainerEventType) []runtimeapi.ContainerEventType {
	t.Helper()
	var got []runtimeapi.ContainerEventType
	for len(got) < len(want) {
		select {
		case ev := <-s.events:
			if ev.ContainerId != id {
				continue
			}
			got = append(got, ev.ContainerEventType)
			if ev.CreatedAt == 0 {
				t.Errorf("event %s has no time", ev.ContainerEventType)
			}
			if ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT && ev.GetPodSandboxStatus().GetId() != pod {
				t.Errorf("event %s names sandbox %q, want %q", ev.ContainerEventType, ev.GetPodSandboxStatus().GetId(), pod)
			}
		case err := <-s.result:
			s.ended = true
			t.Fatalf("GetContainerEvents ended: %v (events so far %v)", err, got)
		case <-h.Ctx.Done():
			t.Fatalf("events = %v, want %v: %v", got, want, h.Ctx.Err())
		}
	}
	return got
}
