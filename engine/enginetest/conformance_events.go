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
	ctx, cancel := context.WithCancel(h.Ctx)
	events := make(chan *runtimeapi.ContainerEventResponse, 256)
	streamErr := make(chan error, 1)
	go func() {
		streamErr <- h.RT.GetContainerEvents(ctx, events, nil)
	}()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		// The client sends into events without watching ctx: drain until
		// the call returns.
		for {
			select {
			case err := <-streamErr:
				return err
			case <-events:
			}
		}
	}
	defer func() { _ = stop() }()

	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	// A probe container's event proves the subscription is live before the
	// checked sequence starts, so no event of it can be missed. The stream
	// may start after a probe's events were sent, so start another probe
	// until one is seen.
	probes := map[string]bool{}
	newProbe := func() {
		probes[h.Run(pod, cfg, h.ContainerConfig(fmt.Sprintf("probe-%d", len(probes)), 0, "/bin/sh", "-c", "exit 0"))] = true
	}
	newProbe()
	retry := time.NewTicker(500 * time.Millisecond)
	defer retry.Stop()
	live := false
	for !live {
		select {
		case ev := <-events:
			live = probes[ev.ContainerId]
		case <-retry.C:
			newProbe()
		case err := <-streamErr:
			stopped = true
			if status.Code(err) == codes.Unimplemented {
				t.Logf("runtime has no container events: %v", err)
				return
			}
			t.Fatalf("GetContainerEvents: %v", err)
		case <-h.Ctx.Done():
			t.Fatalf("no event for the probe container: %v", h.Ctx.Err())
		}
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
	var got []runtimeapi.ContainerEventType
	for len(got) < len(want) {
		select {
		case ev := <-events:
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
		case err := <-streamErr:
			stopped = true
			t.Fatalf("GetContainerEvents ended: %v (events so far %v)", err, got)
		case <-h.Ctx.Done():
			t.Fatalf("events = %v, want %v: %v", got, want, h.Ctx.Err())
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if err := stop(); status.Code(err) != codes.Canceled {
		t.Errorf("GetContainerEvents after cancel: %v, want Canceled", err)
	}
}
