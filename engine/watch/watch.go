package watch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
)

// Defaults of WatcherOptions.
const (
	// DefaultRelistPeriod is the kubelet's generic PLEG relist period.
	DefaultRelistPeriod = time.Second
	// DefaultEventedRelistPeriod is how often the runtime is relisted
	// while container events stream: events are hints that can be lost,
	// the relist is the authority.
	DefaultEventedRelistPeriod = 30 * time.Second
	// DefaultEventRetryMax caps the back-off between attempts to open the
	// container event stream (containerd 1.6 never offers one).
	DefaultEventRetryMax = 5 * time.Minute
)

// Runtime is the part of a CRI runtime service the Watcher reads: the
// lists a relist takes and the container event stream. syncer.Runtime,
// and so k8s.io/cri-client's runtime service, implements it.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	GetContainerEvents(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

// WatcherOptions configure a Watcher.
type WatcherOptions struct {
	// Runtime is the CRI runtime; required.
	Runtime Runtime
	// Clock paces relists and retries; nil means the real clock.
	Clock clock.WithTicker
	// Logger receives stream and relist failures; nil discards.
	Logger *zap.Logger
	// RelistPeriod is the relist period while no container event stream
	// is open; zero means DefaultRelistPeriod.
	RelistPeriod time.Duration
	// EventedRelistPeriod is the relist period while one is; zero means
	// DefaultEventedRelistPeriod.
	EventedRelistPeriod time.Duration
	// EventRetryMax caps the back-off (from 1 s, doubling) between
	// attempts to open the event stream; zero means DefaultEventRetryMax.
	EventRetryMax time.Duration
	// RuntimeEvents, if set, is followed in place of CRI container events
	// when the runtime offers none (containerd 1.6). Optional.
	RuntimeEvents RuntimeEvents
}

// Watcher turns what the runtime does into hints that a pod's state may
// have changed, for the pod workers: CRI container events where the
// runtime streams them (containerd 2.x), re-read at once, and a periodic
// relist of podsync's sandboxes and containers as the authority, since
// events can be dropped. containerd 1.6 answers GetContainerEvents
// Unimplemented: there the watcher follows WatcherOptions.RuntimeEvents
// (containerd's own event service) if set, and the relist alone finds
// changes if not. Only objects labelled podsync.io/managed=true are
// considered.
//
// Build it with NewWatcher, start Run once with a long-lived context, and
// Subscribe as often as needed.
type Watcher struct {
	rt             Runtime
	rtEvents       RuntimeEvents
	clock          clock.WithTicker
	log            *zap.Logger
	relist, evRel  time.Duration
	eventRetryMax  time.Duration
	streaming      atomic.Bool
	eventsReceived atomic.Int64
	// source is the Source of the event stream open (while streaming).
	source    atomic.Uint32
	relistNow chan struct{}
	done      chan struct{}
	wg        sync.WaitGroup

	mu      sync.Mutex
	running bool
	closed  bool
	subs    map[*subscription]struct{}
	// pods is each pod's objects at the last relist; owners maps
	// sandbox and container IDs to their pod.
	pods   map[types.UID]ObjectStates
	owners map[string]types.UID
	// podsMark is the ReadMark of the relist that listed pods.
	podsMark uint64
	// confirming holds, for each id whose runtime events wait for CRI to
	// show them (confirm), the events not confirmed yet, in order.
	confirming map[string][]RuntimeEvent
	// listFailing is set while relists fail, so a failure is logged once.
	listFailing bool
}

// NewWatcher returns a Watcher. It fails with ErrInvalidSpec without a
// Runtime.
func NewWatcher(opts WatcherOptions) (*Watcher, error) {
	if opts.Runtime == nil {
		return nil, fmt.Errorf("engine: WatcherOptions need a Runtime: %w", errdefs.ErrInvalidSpec)
	}
	w := &Watcher{
		rt:            opts.Runtime,
		rtEvents:      opts.RuntimeEvents,
		clock:         opts.Clock,
		log:           opts.Logger,
		relist:        cmpOr(opts.RelistPeriod, DefaultRelistPeriod),
		evRel:         cmpOr(opts.EventedRelistPeriod, DefaultEventedRelistPeriod),
		eventRetryMax: cmpOr(opts.EventRetryMax, DefaultEventRetryMax),
		relistNow:     make(chan struct{}, 1),
		done:          make(chan struct{}),
		subs:          map[*subscription]struct{}{},
		pods:          map[types.UID]ObjectStates{},
		owners:        map[string]types.UID{},
		confirming:    map[string][]RuntimeEvent{},
	}
	if w.clock == nil {
		w.clock = clock.RealClock{}
	}
	if w.log == nil {
		w.log = zap.NewNop()
	}
	return w, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// EventsStreaming reports whether a container event stream is open: CRI
// container events, or the RuntimeEvents that replace them.
func (w *Watcher) EventsStreaming() bool { return w.streaming.Load() }

// EventSource returns the source of the event stream open, zero while
// none is.
func (w *Watcher) EventSource() Source {
	if !w.streaming.Load() {
		return 0
	}
	return Source(w.source.Load())
}

// EventsReceived returns how many container events (CRI or the runtime's)
// the watcher has received.
func (w *Watcher) EventsReceived() int64 { return w.eventsReceived.Load() }

// Run relists the runtime and follows its container events until ctx
// ends; then every subscription channel is closed and Run returns nil once
// all its goroutines have ended. It runs once: a second call returns an
// error.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running || w.closed {
		w.mu.Unlock()
		return errors.New("engine: watcher already ran")
	}
	w.running = true
	w.mu.Unlock()

	w.wg.Go(func() { w.followEvents(ctx) })
	w.relistLoop(ctx)

	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	close(w.done)
	w.wg.Wait()
	return nil
}

// Subscribe returns a channel of UIDs of pods whose runtime state may have
// changed: created, started, stopped or removed sandboxes or containers.
// Every relist that finds a pod changed, and every container event about
// it, sends its UID; UIDs not yet received are sent once, in the order
// they first changed, so a slow reader misses none and gets no
// duplicates. A new subscription first gets every pod the last relist
// found, and the first relist sends every pod podsync holds, so a
// subscriber starts from the whole picture. The channel is closed when ctx
// ends or Run returns.
func (w *Watcher) Subscribe(ctx context.Context) <-chan types.UID {
	uids := make(chan types.UID)
	w.subscribe(ctx, &subscription{uids: uids})
	return uids
}

// SubscribeHints is Subscribe with what the watcher knows of each change:
// the pod's objects at the relist that found it, the container events.
// Hints not yet received are merged per pod.
func (w *Watcher) SubscribeHints(ctx context.Context) <-chan Hint {
	hints := make(chan Hint)
	w.subscribe(ctx, &subscription{hints: hints})
	return hints
}

func (w *Watcher) subscribe(ctx context.Context, sub *subscription) {
	sub.set, sub.wake = map[types.UID]*Hint{}, make(chan struct{}, 1)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		sub.close()
		return
	}
	w.subs[sub] = struct{}{}
	for _, uid := range slices.Sorted(maps.Keys(w.pods)) {
		sub.push(Hint{UID: uid, snapshot: w.pods[uid], snapshotMark: w.podsMark, sources: SourceRelist})
	}
	w.wg.Add(1)
	w.mu.Unlock()
	go func() {
		defer w.wg.Done()
		defer sub.close()
		sub.deliver(ctx, w.done)
		w.mu.Lock()
		delete(w.subs, sub)
		w.mu.Unlock()
	}()
}

// subscription is one subscriber: the hints pending delivery, one per pod
// in the order the pods first changed, sent on uids (Subscribe) or hints
// (subscribeHints).
type subscription struct {
	mu      sync.Mutex
	pending []types.UID
	set     map[types.UID]*Hint
	wake    chan struct{}
	uids    chan types.UID
	hints   chan Hint
}

func (s *subscription) close() {
	if s.uids != nil {
		close(s.uids)
	} else {
		close(s.hints)
	}
}

func (s *subscription) push(h Hint) {
	s.mu.Lock()
	if p := s.set[h.UID]; p != nil {
		p.Merge(h)
	} else {
		h.events = slices.Clone(h.events)
		s.set[h.UID] = &h
		s.pending = append(s.pending, h.UID)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) deliver(ctx context.Context, done <-chan struct{}) {
	for {
		// Take the UID off the pending set before sending it, so that a
		// change while it is being sent queues it again.
		s.mu.Lock()
		var h Hint
		ok := len(s.pending) > 0
		if ok {
			uid := s.pending[0]
			s.pending = s.pending[1:]
			h = *s.set[uid]
			delete(s.set, uid)
		}
		s.mu.Unlock()
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return
			case <-done:
				return
			}
		}
		// A nil channel blocks: one of the two sends is live.
		var uids chan types.UID
		var hints chan Hint
		if s.uids != nil {
			uids = s.uids
		} else {
			hints = s.hints
		}
		select {
		case uids <- h.UID:
		case hints <- h:
		case <-ctx.Done():
			return
		case <-done:
			return
		}
	}
}

func (w *Watcher) notify(hints ...Hint) {
	if len(hints) == 0 {
		return
	}
	w.mu.Lock()
	subs := slices.Collect(maps.Keys(w.subs))
	w.mu.Unlock()
	for _, s := range subs {
		for _, h := range hints {
			s.push(h)
		}
	}
}

// triggerRelist makes the relist loop relist now.
func (w *Watcher) triggerRelist() {
	select {
	case w.relistNow <- struct{}{}:
	default:
	}
}

func (w *Watcher) relistLoop(ctx context.Context) {
	for {
		w.relistOnce(ctx)
		period := w.relist
		if w.streaming.Load() {
			period = w.evRel
		}
		t := w.clock.NewTimer(period)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w.relistNow:
			t.Stop()
		case <-t.C():
		}
	}
}

// relistOnce lists podsync's sandboxes and containers and notifies the
// pods whose set of objects or their states changed since the last relist.
func (w *Watcher) relistOnce(ctx context.Context) {
	sel := map[string]string{model.LabelManaged: "true"}
	sbs, err := w.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	var ctrs []*runtimeapi.Container
	if err == nil {
		ctrs, err = w.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		first := !w.listFailing
		w.listFailing = true
		w.mu.Unlock()
		if first {
			w.log.Warn("relist failed; retrying", zap.Error(err))
		}
		return
	}
	// Taken once both lists returned: a pass's read that begins after
	// it (a greater mark) sees the objects as new as these or newer.
	mark := ReadMark()
	pods := map[types.UID]ObjectStates{}
	owners := map[string]types.UID{}
	add := func(labels map[string]string, id string, st objectState) {
		uid := types.UID(labels[model.LabelPodUID])
		if uid == "" || !model.IsManaged(labels) {
			return
		}
		owners[id] = uid
		if pods[uid] == nil {
			pods[uid] = ObjectStates{}
		}
		pods[uid][id] = st
	}
	for _, sb := range sbs {
		add(sb.GetLabels(), sb.GetId(), sandboxObject(model.SandboxStateFromCRI(sb.GetState())))
	}
	for _, c := range ctrs {
		add(c.GetLabels(), c.GetId(), containerObject(model.ContainerStateFromCRI(c.GetState())))
	}
	w.mu.Lock()
	if w.listFailing {
		w.log.Info("relist recovered")
	}
	w.listFailing = false
	var changed []Hint
	for uid, objs := range pods {
		if prev, ok := w.pods[uid]; !ok || !maps.Equal(prev, objs) {
			changed = append(changed, Hint{UID: uid, snapshot: objs, snapshotMark: mark, sources: SourceRelist})
		}
	}
	for uid := range w.pods {
		if _, ok := pods[uid]; !ok {
			// Nothing left: an empty snapshot, not nil (no snapshot).
			changed = append(changed, Hint{UID: uid, snapshot: ObjectStates{}, snapshotMark: mark, sources: SourceRelist})
		}
	}
	w.pods, w.owners, w.podsMark = pods, owners, mark
	w.mu.Unlock()
	slices.SortFunc(changed, func(a, b Hint) int { return strings.Compare(string(a.UID), string(b.UID)) })
	w.notify(changed...)
}

// followEvents keeps a container event stream open while ctx lasts:
// CRI's, or the RuntimeEvents that replace it on a runtime without CRI
// events. It retries with back-off when the stream ends, and relists
// after every change of the stream's state so nothing missed meanwhile
// stays unseen.
func (w *Watcher) followEvents(ctx context.Context) {
	delay := time.Second
	logged, replaced := false, false
	for {
		received, err := w.streamEvents(ctx)
		if ctx.Err() != nil {
			return
		}
		if !received && w.rtEvents != nil && w.rtEvents.Replaces(err) {
			if !replaced {
				w.log.Info("the runtime offers no CRI container events; following its own events", zap.Error(err))
				replaced = true
			}
			received, err = w.followRuntimeEvents(ctx)
			if ctx.Err() != nil {
				return
			}
		}
		if received {
			delay = time.Second
			logged = false
		}
		if !logged {
			w.log.Info("container events unavailable; relisting", zap.Error(err), zap.Duration("retry_in", delay))
			logged = true
		}
		w.triggerRelist()
		select {
		case <-ctx.Done():
			return
		case <-w.clock.After(delay):
		}
		delay = min(delay*2, w.eventRetryMax)
	}
}

// confirmTimeout bounds how long a runtime event waits for CRI to show
// it; the hint goes out then all the same.
const confirmTimeout = 2 * time.Second

// streamEvents runs one GetContainerEvents call until it fails or ctx
// ends, notifying the pods events are about. It reports whether an event
// arrived.
func (w *Watcher) streamEvents(ctx context.Context) (bool, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan *runtimeapi.ContainerEventResponse, 128)
	errc := make(chan error, 1)
	go func() {
		errc <- w.rt.GetContainerEvents(sctx, events, func(runtimeapi.RuntimeService_GetContainerEventsClient) {
			w.source.Store(uint32(SourceCRIEvents))
			w.streaming.Store(true)
			w.triggerRelist()
		})
	}()
	defer func() {
		w.streaming.Store(false)
		w.triggerRelist()
	}()
	received := false
	for {
		select {
		case ev := <-events:
			received = true
			w.eventsReceived.Add(1)
			w.handleEvent(ev)
		case err := <-errc:
			return received, err
		case <-ctx.Done():
			cancel()
			// The client sends into events without watching ctx: drain
			// until the call returns.
			for {
				select {
				case <-events:
				case err := <-errc:
					return received, err
				}
			}
		}
	}
}

// handleEvent notifies the pod a container event is about, found by the
// labels it carries or, for a removed container, by its ID.
func (w *Watcher) handleEvent(ev *runtimeapi.ContainerEventResponse) {
	var uid types.UID
	if l := ev.GetPodSandboxStatus().GetLabels(); model.IsManaged(l) {
		uid = types.UID(l[model.LabelPodUID])
	}
	for _, cs := range ev.GetContainersStatuses() {
		if uid == "" && model.IsManaged(cs.GetLabels()) {
			uid = types.UID(cs.GetLabels()[model.LabelPodUID])
		}
	}
	w.mu.Lock()
	if uid == "" {
		uid = w.owners[ev.GetContainerId()]
	} else if ev.GetContainerEventType() != runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
		w.owners[ev.GetContainerId()] = uid
	}
	w.mu.Unlock()
	if uid != "" {
		w.notify(Hint{UID: uid, events: []objectEvent{{id: ev.GetContainerId(), typ: ev.GetContainerEventType()}}, sources: SourceCRIEvents})
	}
}
