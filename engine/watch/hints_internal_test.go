package watch

import (
	"fmt"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
)

func TestHintSeenBy(t *testing.T) {
	const (
		created = runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
		started = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
		stopped = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
		deleted = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
	)
	// What the last pass saw: a ready sandbox, a running container, an
	// exited one, one created and not started.
	seen := ObjectStates{"sb": sandboxReady, "run": containerRunning, "done": containerExited, "new": containerCreated}
	ev := func(id string, typ runtimeapi.ContainerEventType) Hint {
		return Hint{events: []objectEvent{{id: id, typ: typ}}}
	}
	for _, tc := range []struct {
		name string
		h    Hint
		seen ObjectStates
		want bool
		mark uint64 // the read mark of seen
	}{
		{"nothing known of the change", Hint{Unknown: true}, seen, false, 0},
		{"no clean pass before", ev("run", started), nil, false, 0},
		{"created, exists", ev("new", created), seen, true, 0},
		{"created, not seen", ev("other", created), seen, false, 0},
		{"started, running", ev("run", started), seen, true, 0},
		{"started, exited since", ev("done", started), seen, true, 0},
		{"started, seen only created", ev("new", started), seen, false, 0},
		{"sandbox started, ready", ev("sb", started), seen, true, 0},
		{"stopped, exited", ev("done", stopped), seen, true, 0},
		{"stopped, seen running", ev("run", stopped), seen, false, 0},
		{"sandbox stopped, seen ready", ev("sb", stopped), seen, false, 0},
		{"sandbox stopped, seen not ready", ev("sb", stopped), ObjectStates{"sb": sandboxNotReady}, true, 0},
		{"deleted, gone", ev("gone", deleted), seen, true, 0},
		{"deleted, seen", ev("done", deleted), seen, false, 0},
		{"unknown event type", ev("run", runtimeapi.ContainerEventType(42)), seen, false, 0},
		{"relist as seen", Hint{snapshot: ObjectStates{"sb": sandboxReady, "run": containerRunning, "done": containerExited, "new": containerCreated}}, seen, true, 0},
		{"relist, a state changed", Hint{snapshot: ObjectStates{"sb": sandboxReady, "run": containerExited, "done": containerExited, "new": containerCreated}}, seen, false, 0},
		{"relist, an object more", Hint{snapshot: ObjectStates{"sb": sandboxReady, "run": containerRunning, "done": containerExited, "new": containerCreated, "x": containerCreated}}, seen, false, 0},
		{"relist, nothing left, pass saw nothing", Hint{snapshot: ObjectStates{}}, ObjectStates{}, true, 0},
		{"relist, nothing left, pass saw objects", Hint{snapshot: ObjectStates{}}, seen, false, 0},
		{"events all seen", Hint{events: []objectEvent{{"new", created}, {"run", started}, {"done", stopped}}}, seen, true, 0},
		{"one event not seen", Hint{events: []objectEvent{{"run", started}, {"run", stopped}}}, seen, false, 0},
		// A relist that ended before the pass's read began (a smaller
		// mark) is older than what the pass saw: the mid-pass sandbox
		// without its container does not cost a pass.
		{"relist listed before the read, mid-pass", Hint{snapshot: ObjectStates{"sb": sandboxReady}, snapshotMark: 5}, seen, true, 7},
		{"relist listed after the read, a state changed", Hint{snapshot: ObjectStates{"sb": sandboxReady, "run": containerExited, "done": containerExited, "new": containerCreated}, snapshotMark: 9}, seen, false, 7},
		{"relist before the read, read mark unknown", Hint{snapshot: ObjectStates{"sb": sandboxReady}, snapshotMark: 5}, seen, false, 0},
		{"relist without a mark", Hint{snapshot: ObjectStates{"sb": sandboxReady}}, seen, false, 7},
		{"older relist, an event not seen", Hint{snapshot: ObjectStates{"sb": sandboxReady}, snapshotMark: 5, events: []objectEvent{{"run", stopped}}}, seen, false, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.h.SeenBy(tc.seen, tc.mark); got != tc.want {
				t.Errorf("seenBy = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHintMerge(t *testing.T) {
	h := Hint{UID: "u", snapshot: ObjectStates{"a": containerRunning}, events: []objectEvent{{id: "a"}}}
	h.Merge(Hint{UID: "u", events: []objectEvent{{id: "b"}}})
	if h.Unknown || len(h.snapshot) != 1 || len(h.events) != 2 {
		t.Fatalf("merged %+v", h)
	}
	h.Merge(Hint{UID: "u", snapshot: ObjectStates{}, snapshotMark: 3})
	if h.snapshot == nil || len(h.snapshot) != 0 || h.snapshotMark != 3 {
		t.Errorf("a later relist's snapshot did not replace the earlier: %v (mark %d)", h.snapshot, h.snapshotMark)
	}
	h.Merge(Hint{UID: "u", Unknown: true})
	if !h.Unknown || h.events != nil || h.snapshot != nil {
		t.Errorf("after an unknown change: %+v, want unknown and nothing else", h)
	}
	h.Merge(Hint{UID: "u", events: []objectEvent{{id: "c"}}})
	if !h.Unknown || h.events != nil {
		t.Errorf("an unknown hint gathered events: %+v", h)
	}

	// Events gather up to a bound, then the hint only asks for a pass.
	var b Hint
	for i := range maxHintEvents + 1 {
		b.Merge(Hint{UID: "u", events: []objectEvent{{id: fmt.Sprint(i)}}})
	}
	if !b.Unknown || b.events != nil {
		t.Errorf("after %d events: unknown %v with %d events, want unknown without events", maxHintEvents+1, b.Unknown, len(b.events))
	}
}

// TestStatesOfMatchesRelist: a view's objects and a relist's listing of
// the same objects compare equal, so a relist of a pod as a pass left it
// costs no pass.
func TestStatesOfMatchesRelist(t *testing.T) {
	v := model.RuntimeView{
		Sandboxes:  []model.Sandbox{{ID: "s1", State: model.SandboxReady}, {ID: "s0", State: model.SandboxNotReady}},
		Containers: []model.ContainerInstance{{ID: "c1", State: model.ContainerRunning}, {ID: "c2", State: model.ContainerExited}, {ID: "c3", State: model.ContainerCreated}, {ID: "c4", State: model.ContainerUnknown}},
	}
	listed := ObjectStates{
		"s1": sandboxObject(model.SandboxStateFromCRI(runtimeapi.PodSandboxState_SANDBOX_READY)),
		"s0": sandboxObject(model.SandboxStateFromCRI(runtimeapi.PodSandboxState_SANDBOX_NOTREADY)),
		"c1": containerObject(model.ContainerStateFromCRI(runtimeapi.ContainerState_CONTAINER_RUNNING)),
		"c2": containerObject(model.ContainerStateFromCRI(runtimeapi.ContainerState_CONTAINER_EXITED)),
		"c3": containerObject(model.ContainerStateFromCRI(runtimeapi.ContainerState_CONTAINER_CREATED)),
		"c4": containerObject(model.ContainerStateFromCRI(runtimeapi.ContainerState_CONTAINER_UNKNOWN)),
	}
	h := Hint{snapshot: listed}
	if !h.SeenBy(StatesOf(v), 0) {
		t.Errorf("statesOf(view) = %v, relist = %v", StatesOf(v), listed)
	}
}
