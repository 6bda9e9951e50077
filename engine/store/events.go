package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	bolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/types"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// eventSource is the component the kubelet's recorder names in its
// events; the correlator keys by it.
const eventSource = "kubelet"

// correlate runs an event about pod through the kubelet's event
// correlator (client-go's record.EventCorrelator with the kubelet's
// defaults, the one its recorder runs before writing an event): an event
// identical to one seen before — same pod, container, type, reason and
// message — continues that one's series, with its Name and FirstTime and
// a Count one higher; more than ten similar events (differing in their
// message only) within ten minutes become one series "(combined from
// similar events): …"; and a pod's events of one type beyond a burst of 25
// are throttled to one every five minutes. It returns the event to append,
// or skip when the throttle holds it back (its count goes on, so the next
// one that passes carries every occurrence).
//
// The correlator remembers the last 4096 series in memory, as the
// kubelet's: after a restart of podsyncd a repeat starts a new series.
func (s *Store) correlate(pod PodRef, ev Event) (out Event, skip bool) {
	t := ev.Time
	if t.IsZero() {
		t = s.clock.Now()
	}
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	if ev.Container != "" {
		// The kubelet's field path of a container's events; the
		// correlator keys by it, so the container is part of the
		// series.
		ref.FieldPath = fmt.Sprintf("spec.containers{%s}", ev.Container)
	}
	mt := metav1.NewTime(t)
	k := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", pod.Name, t.UnixNano()), Namespace: pod.Namespace},
		InvolvedObject: ref,
		Reason:         ev.Reason,
		Message:        ev.Message,
		Type:           ev.Type,
		Source:         corev1.EventSource{Component: eventSource},
		FirstTimestamp: mt,
		LastTimestamp:  mt,
		Count:          1,
	}
	res, err := s.events.EventCorrelate(k)
	switch {
	case err == nil && res.Skip:
		return Event{}, true
	case err != nil || res.Event == nil:
		// Only a nil event fails; the event is kept as it came.
		ev.Name, ev.Count, ev.FirstTime, ev.Time = k.Name, 1, t, t
		return ev, false
	}
	c := res.Event
	ev.Name, ev.Count, ev.Message = c.Name, c.Count, c.Message
	ev.FirstTime, ev.Time = c.FirstTimestamp.Time, c.LastTimestamp.Time
	return ev, false
}

// newEventCorrelator is the kubelet's: client-go's defaults (an LRU of
// 4096 series, aggregation of 10 similar events in 600 s, a throttle of
// 25 events and one per 300 s per pod and type), on the store's clock;
// burst, when not zero, replaces the throttle's burst, and a negative one
// turns the throttle off.
func newEventCorrelator(c clock.PassiveClock, burst int) *record.EventCorrelator {
	opts := record.CorrelatorOptions{Clock: c}
	switch {
	case burst < 0:
		opts.BurstSize, opts.QPS = math.MaxInt32, math.MaxFloat32
	case burst > 0:
		opts.BurstSize = burst
	}
	return record.NewEventCorrelatorWithOptions(opts)
}

// EventFilter selects events by pod; the zero value selects all.
type EventFilter struct {
	// Namespace, when set, keeps the events of its pods.
	Namespace string
	// Name, when set, keeps the events of the pods of that name.
	Name string
	// UID, when set, keeps the events of that pod.
	UID types.UID
}

func (f EventFilter) matches(p PodRef) bool {
	return (f.Namespace == "" || p.Namespace == f.Namespace) && (f.Name == "" || p.Name == f.Name) && (f.UID == "" || p.UID == f.UID)
}

// Events returns the events the revision log still holds that f selects,
// one per series (its newest occurrence; an entry of an older store,
// without a series name, is its own series), ordered by their time, then
// revision; and the revision of the snapshot read.
func (s *Store) Events(f EventFilter) ([]Entry, int64, error) {
	var (
		out  []Entry
		snap int64
	)
	err := s.view(func(tx *bolt.Tx) error {
		snap = getInt(tx.Bucket(bucketMeta), keyRev)
		series := map[string]int{} // index in out, by pod uid and series name
		c := tx.Bucket(bucketLog).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			// Only events are decoded: a status is most of the log.
			if !bytes.Contains(v, eventKindJSON) {
				continue
			}
			e := Entry{Revision: keyRevision(k)}
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode revision log entry %d: %w", e.Revision, err)
			}
			if e.Kind != KindEvent || e.Event == nil || !f.matches(e.Pod) {
				continue
			}
			if e.Event.Name == "" {
				out = append(out, e)
				continue
			}
			key := string(e.Pod.UID) + "/" + e.Event.Name
			if i, ok := series[key]; ok {
				out[i] = e
				continue
			}
			series[key] = len(out)
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	slices.SortStableFunc(out, func(a, b Entry) int {
		if c := a.Event.Time.Compare(b.Event.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Revision, b.Revision)
	})
	return out, snap, nil
}

// eventKindJSON is how an event entry names its kind.
var eventKindJSON = []byte(`"kind":"` + string(KindEvent) + `"`)
