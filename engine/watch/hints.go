package watch

import (
	"maps"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
)

// objectState is the state of one of a pod's sandboxes or containers as
// far as a change hint goes: its kind and CRI state.
type objectState uint8

const (
	sandboxNotReady objectState = iota + 1
	sandboxReady
	containerCreated
	containerRunning
	containerExited
	containerUnknown
)

// ObjectStates maps the CRI ids of a pod's sandboxes and containers to
// their states.
type ObjectStates map[string]objectState

// sandboxObject is a sandbox's objectState.
func sandboxObject(s model.SandboxState) objectState {
	if s == model.SandboxReady {
		return sandboxReady
	}
	return sandboxNotReady
}

// containerObject is a container's objectState.
func containerObject(s model.ContainerState) objectState {
	switch s {
	case model.ContainerCreated:
		return containerCreated
	case model.ContainerRunning:
		return containerRunning
	case model.ContainerExited:
		return containerExited
	default:
		return containerUnknown
	}
}

// StatesOf returns the objects of a view and their states.
func StatesOf(v model.RuntimeView) ObjectStates {
	out := make(ObjectStates, len(v.Sandboxes)+len(v.Containers))
	for _, sb := range v.Sandboxes {
		out[sb.ID] = sandboxObject(sb.State)
	}
	for _, c := range v.Containers {
		out[c.ID] = containerObject(c.State)
	}
	return out
}

// objectEvent is one CRI container event: what happened to which
// sandbox or container (containerd reports sandboxes' lifecycles as
// container events with the sandbox's id).
type objectEvent struct {
	id  string
	typ runtimeapi.ContainerEventType
}

// seenBy reports whether states, read after the event, show what the
// event reports: the object created or started exists, the one stopped
// has stopped, the one deleted is gone. A state past the event's also
// shows it (a container exited has been started).
func (e objectEvent) seenBy(states ObjectStates) bool {
	st, ok := states[e.id]
	switch e.typ {
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		return ok
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		return ok && st != containerCreated && st != containerUnknown
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		return st == containerExited || st == sandboxNotReady
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		return !ok
	default:
		return false
	}
}

// Source is where a hint came from; a merged hint has several.
type Source uint8

// Sources of hints.
const (
	// SourceCRIEvents: a CRI container event (containerd 2.x).
	SourceCRIEvents Source = 1 << iota
	// SourceContainerdEvents: an event of the runtime's own event
	// service, where CRI offers none (containerd 1.6).
	SourceContainerdEvents
	// SourceRelist: a relist that found the pod's objects changed.
	SourceRelist
)

// sourceNames are the names of the sources, the source label of
// podsync_runtime_hints_total.
var sourceNames = []struct {
	s    Source
	name string
}{{SourceCRIEvents, "cri_events"}, {SourceContainerdEvents, "containerd_events"}, {SourceRelist, "relist"}}

// SourceNames returns the name of every source, in a fixed order.
func SourceNames() []string {
	out := make([]string, len(sourceNames))
	for i, n := range sourceNames {
		out[i] = n.name
	}
	return out
}

// Names returns the names of the sources in s, in SourceNames' order.
func (s Source) Names() []string {
	var out []string
	for _, n := range sourceNames {
		if s&n.s != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// String joins s's names with "+"; "none" when s is zero.
func (s Source) String() string {
	if s == 0 {
		return "none"
	}
	return strings.Join(s.Names(), "+")
}

// Hint is what the runtime watcher tells a pod's worker: that the pod's
// objects may have changed, and what it knows of the change, so a worker
// whose last pass already saw it can skip the pass the hint would cost.
// Hints for the same pod not yet delivered are merged.
type Hint struct {
	UID types.UID
	// unknown is set when nothing is known of the change: a pass must
	// run.
	Unknown bool
	// snapshot is the pod's objects as the last relist listed them; nil
	// if no relist is part of the hint. snapshotMark is the ReadMark the
	// relist took before it listed.
	snapshot     ObjectStates
	snapshotMark uint64
	// events are the container events of the hint, in order.
	events []objectEvent
	// sources are where the hint and those merged into it came from;
	// zero for a hint of the node's own (Unknown).
	sources Source
}

// Sources returns where h and the hints merged into it came from.
func (h *Hint) Sources() Source { return h.sources }

// maxHintEvents bounds the events a hint gathers while its pod's worker
// is busy (a long kill, say); past it the hint only asks for a pass.
const maxHintEvents = 64

// Merge adds a later hint for the same pod to h.
func (h *Hint) Merge(later Hint) {
	h.sources |= later.sources
	h.Unknown = h.Unknown || later.Unknown || len(h.events)+len(later.events) > maxHintEvents
	if h.Unknown {
		// A pass runs whatever else the hint says.
		h.snapshot, h.events = nil, nil
		return
	}
	if later.snapshot != nil {
		h.snapshot, h.snapshotMark = later.snapshot, later.snapshotMark
	}
	h.events = append(h.events, later.events...)
}

// readMarks orders the reads of the runtime: relists and the passes'
// reads of a pod take a mark before they read.
var readMarks atomic.Uint64

// ReadMark returns a mark greater than every mark returned before: a
// read of the runtime that begins after taking mark m sees every change
// that a read begun before taking a smaller mark saw.
func ReadMark() uint64 { return readMarks.Add(1) }

// SeenBy reports whether states, read after every change h reports,
// show all of them: then a pass would find what the last one found.
// readMark is the ReadMark taken before states were read (0: unknown). A
// relist snapshot listed before that read (a smaller mark) is superseded
// by it even where they differ: it was taken in the middle of the pass
// (a sandbox without the container the pass then created), and what it
// shows of the pod's objects, the later read saw too or saw change since.
func (h *Hint) SeenBy(states ObjectStates, readMark uint64) bool {
	if h.Unknown || states == nil {
		return false
	}
	older := h.snapshotMark != 0 && readMark != 0 && h.snapshotMark < readMark
	if h.snapshot != nil && !older && !maps.Equal(h.snapshot, states) {
		return false
	}
	for _, e := range h.events {
		if !e.seenBy(states) {
			return false
		}
	}
	return true
}
