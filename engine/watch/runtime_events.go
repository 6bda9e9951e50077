package watch

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
)

// RuntimeEvents is the runtime's own event stream, which the watcher
// follows for hints where the runtime offers no CRI container events:
// containerd's event service on containerd 1.6 (internal/ctrdevents
// implements it). Its events carry no labels: the watcher maps their ids
// to pods by its last relist, and relists at once for the stop of an id
// it does not know.
type RuntimeEvents interface {
	// Replaces reports whether err, with which a CRI GetContainerEvents
	// call ended before any event, says that the runtime offers no CRI
	// container events (gRPC Unimplemented), so that these events take
	// their place.
	Replaces(err error) bool
	// Follow subscribes to the runtime's events, calls connected once the
	// subscription is open, then fn with each event about a sandbox or a
	// container, in order, until the stream breaks (an error) or ctx
	// ends (ctx's error). It calls both on its own goroutine.
	Follow(ctx context.Context, connected func(), fn func(RuntimeEvent)) error
}

// RuntimeEvent is one event of RuntimeEvents.
type RuntimeEvent struct {
	// ID is the CRI id of the sandbox or container (containerd's
	// container and task id).
	ID string
	// Type is what happened, as the CRI container event that reports it.
	Type runtimeapi.ContainerEventType
}

// followRuntimeEvents follows the RuntimeEvents until the stream breaks
// or ctx ends, notifying the pods events are about. It reports whether
// the stream opened.
func (w *Watcher) followRuntimeEvents(ctx context.Context) (bool, error) {
	opened := false
	defer func() {
		if opened {
			w.streaming.Store(false)
			w.triggerRelist()
		}
	}()
	err := w.rtEvents.Follow(ctx, func() {
		opened = true
		w.source.Store(uint32(SourceContainerdEvents))
		w.streaming.Store(true)
		w.triggerRelist()
	}, func(ev RuntimeEvent) { w.handleRuntimeEvent(ctx, ev) })
	return opened, err
}

// handleRuntimeEvent notifies the pod a runtime event is about, found by
// the id the last relist listed, once CRI shows what the event reports
// (confirm). The stop of an id the relist did not list (an object
// created since, which crashed) makes it relist now, which finds the
// object and its pod. The start of such an id is a pass's own start
// (only podsync's passes create and start the objects it watches), which
// that pass reads back: relisting for each would hand the other pods'
// workers snapshots taken in the middle of their passes, each costing a
// pass. A deletion of an unknown id is no one's.
func (w *Watcher) handleRuntimeEvent(ctx context.Context, ev RuntimeEvent) {
	w.eventsReceived.Add(1)
	w.mu.Lock()
	uid, ok := w.owners[ev.ID]
	st := w.pods[uid][ev.ID]
	queue, busy := w.confirming[ev.ID]
	if ok {
		w.confirming[ev.ID] = append(queue, ev)
	}
	w.mu.Unlock()
	switch {
	case ok && busy:
		// The confirmation in flight takes this event next.
	case ok:
		sandbox := st == sandboxReady || st == sandboxNotReady
		w.wg.Go(func() {
			for {
				w.mu.Lock()
				queue := w.confirming[ev.ID]
				if len(queue) == 0 {
					delete(w.confirming, ev.ID)
					w.mu.Unlock()
					return
				}
				next := queue[0]
				w.confirming[ev.ID] = queue[1:]
				w.mu.Unlock()
				w.confirm(ctx, uid, next, sandbox)
			}
		})
	case ev.Type == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		w.triggerRelist()
	}
}

// confirm notifies uid's worker of ev once CRI's own view of the object
// shows it: containerd publishes a task's events before its CRI plugin
// has handled them (1.6 marks a container exited after it has deleted the
// exited task), and a pass woken earlier would read the old state and
// find nothing to do. It polls the object, briefly, and notifies when CRI
// shows the event or the object is gone, or after confirmTimeout all the
// same (and relists then).
func (w *Watcher) confirm(ctx context.Context, uid types.UID, ev RuntimeEvent, sandbox bool) {
	oe := objectEvent{id: ev.ID, typ: ev.Type}
	deadline := w.clock.Now().Add(confirmTimeout)
	delay := 2 * time.Millisecond
	for {
		st, found, err := w.stateOf(ctx, ev.ID, sandbox)
		if ctx.Err() != nil {
			return
		}
		if err == nil && (!found || oe.seenBy(ObjectStates{ev.ID: st})) {
			break
		}
		if !w.clock.Now().Before(deadline) {
			w.triggerRelist()
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-w.clock.After(delay):
		}
		delay = min(2*delay, 10*time.Millisecond)
	}
	w.notify(Hint{UID: uid, events: []objectEvent{oe}, sources: SourceContainerdEvents})
}

// stateOf reads one sandbox's or container's state through CRI; found is
// false when the runtime does not hold it.
func (w *Watcher) stateOf(ctx context.Context, id string, sandbox bool) (st objectState, found bool, err error) {
	if sandbox {
		sbs, err := w.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: id})
		if err != nil || len(sbs) == 0 {
			return 0, false, err
		}
		return sandboxObject(model.SandboxStateFromCRI(sbs[0].GetState())), true, nil
	}
	ctrs, err := w.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{Id: id})
	if err != nil || len(ctrs) == 0 {
		return 0, false, err
	}
	return containerObject(model.ContainerStateFromCRI(ctrs[0].GetState())), true, nil
}
