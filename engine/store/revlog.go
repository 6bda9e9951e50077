package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/errdefs"
)

// Kind is the kind of a Change.
type Kind string

// Kinds of changes. Callers Append KindStatus and KindEvent; Delete
// records KindDeleted.
const (
	// KindStatus is a new status of the pod.
	KindStatus Kind = "Status"
	// KindEvent is an event about the pod.
	KindEvent Kind = "Event"
	// KindDeleted says the pod was deleted; it is its last entry.
	KindDeleted Kind = "Deleted"
	// KindObjectApplied is a stored ConfigMap or Secret created or
	// changed (PutObjects); KindObjectDeleted its deletion
	// (DeleteObject). Their Pod is zero and Object set.
	KindObjectApplied Kind = "ObjectApplied"
	KindObjectDeleted Kind = "ObjectDeleted"
)

// Event is a Kubernetes-like event about a pod (Pulled, Started, Killing,
// BackOff, Unhealthy, …), one occurrence of a series as core/v1 Event
// counts them: Append gives a repeat of an event (same pod, container,
// type, reason and message) its series' Name and FirstTime and a Count
// one higher, as the kubelet's event correlator does (events.go).
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning. Required.
	Type string `json:"type"`
	// Reason in CamelCase. Required.
	Reason string `json:"reason"`
	// Message for humans.
	Message string `json:"message,omitempty"`
	// Container the event is about, if any.
	Container string `json:"container,omitempty"`
	// Time of the event, core/v1's lastTimestamp; Append sets it to the
	// append time when zero.
	Time time.Time `json:"time"`
	// Name identifies the event's series, core/v1 Event's metadata.name
	// ("<pod>.<hex nanoseconds of FirstTime>"): every occurrence of the
	// series has it. Set by Append; empty in entries of older stores.
	Name string `json:"name,omitempty"`
	// Count is how many times the series occurred up to this one (1 for
	// the first), core/v1's count. Set by Append; 0 in entries of older
	// stores, which means 1.
	Count int32 `json:"count,omitempty"`
	// FirstTime is when the series first occurred, core/v1's
	// firstTimestamp. Set by Append.
	FirstTime time.Time `json:"firstTime,omitzero"`
}

// Change is one change of a pod, as recorded in the revision log.
type Change struct {
	// Kind of the change.
	Kind Kind `json:"kind"`
	// Pod the change is about.
	Pod PodRef `json:"pod"`
	// Status is the pod's new status, for KindStatus.
	Status *corev1.PodStatus `json:"status,omitempty"`
	// Sandbox is the CRI sandbox the pod's containers ran in when Status
	// was read, for KindStatus; zero when it had none.
	Sandbox SandboxRef `json:"sandbox,omitzero"`
	// Event is the event, for KindEvent.
	Event *Event `json:"event,omitempty"`
	// Labels are the pod's labels when it was deleted, for KindDeleted:
	// a watcher selecting by label that never saw the pod can still tell
	// whether the deletion is one it selects.
	Labels map[string]string `json:"labels,omitempty"`
	// Object is the stored object the change is about, for
	// KindObjectApplied and KindObjectDeleted (then Labels are its
	// labels).
	Object *ObjectRef `json:"object,omitempty"`
	// ConfigMap or Secret is the object as stored after the change, for
	// KindObjectApplied, a Secret's values removed.
	ConfigMap *corev1.ConfigMap `json:"configMap,omitempty"`
	Secret    *corev1.Secret    `json:"secret,omitempty"`
}

// IsObject reports whether the change is about a stored object rather
// than a pod.
func (c *Change) IsObject() bool { return c.Object != nil }

// SandboxRef names a pod's CRI sandbox.
type SandboxRef struct {
	ID      string `json:"id"`
	Attempt uint32 `json:"attempt"`
}

// StatusChange returns the change of pod's status to status; set its
// Sandbox if the pod has one.
func StatusChange(pod PodRef, status *corev1.PodStatus) Change {
	return Change{Kind: KindStatus, Pod: pod, Status: status}
}

// EventChange returns an event about pod.
func EventChange(pod PodRef, ev Event) Change {
	return Change{Kind: KindEvent, Pod: pod, Event: &ev}
}

// Entry is a Change in the revision log. Entries handed to watchers are
// shared between them: treat them as read-only.
type Entry struct {
	// Revision of the entry, unique and increasing.
	Revision int64 `json:"-"`
	// Time the entry was appended.
	Time time.Time `json:"time"`
	Change
}

// Append records changes, each with its own revision, in one transaction,
// and returns the store's revision after it. A status change also becomes
// the pod's stored status (and ModRevision); a status equal to the stored
// one is dropped, so passes that change nothing add nothing. An event is
// correlated first, as the kubelet's recorder correlates it (correlate):
// a repeat is recorded as the next occurrence of its series, and an
// event the throttle holds back is not recorded. Append copies what it is
// given.
//
// Append returns errdefs.ErrInvalidRecord for a change that is not a valid status or
// event, and errdefs.ErrPodNotFound for a pod that is not stored (or no longer is);
// then nothing is recorded.
func (s *Store) Append(changes ...Change) (int64, error) {
	for _, c := range changes {
		if err := validateChange(c); err != nil {
			return 0, err
		}
	}
	if slices.ContainsFunc(changes, func(c Change) bool { return c.Kind == KindEvent }) {
		// An event of a pod that is not stored is refused before the
		// correlator counts it.
		if err := s.view(func(tx *bolt.Tx) error {
			pods := tx.Bucket(bucketPods)
			for _, c := range changes {
				if c.Kind == KindEvent && pods.Get([]byte(c.Pod.UID)) == nil {
					return fmt.Errorf("append %s of pod %s: %w", c.Kind, c.Pod, errdefs.ErrPodNotFound)
				}
			}
			return nil
		}); err != nil {
			return 0, err
		}
		kept := make([]Change, 0, len(changes))
		for _, c := range changes {
			if c.Kind == KindEvent {
				ev, skip := s.correlate(c.Pod, *c.Event)
				if skip {
					continue
				}
				c.Event = &ev
			}
			kept = append(kept, c)
		}
		changes = kept
	}
	var rev int64
	err := s.update(func(tx *bolt.Tx, st *txState) error {
		pods := tx.Bucket(bucketPods)
		// A pass appends its events and its status together: each pod's
		// record is decoded once, and written once if its status changed.
		type touched struct {
			rec     *PodRecord
			changed bool
		}
		var recs map[types.UID]*touched
		var order []*touched // recs in the order first seen, to write them
		for _, c := range changes {
			t := recs[c.Pod.UID]
			if t == nil {
				data := pods.Get([]byte(c.Pod.UID))
				if data == nil {
					return fmt.Errorf("append %s of pod %s: %w", c.Kind, c.Pod, errdefs.ErrPodNotFound)
				}
				rec, err := decodeRecord(data)
				if err != nil {
					return err
				}
				if recs == nil {
					recs = make(map[types.UID]*touched, 1)
				}
				t = &touched{rec: rec}
				recs[c.Pod.UID] = t
				order = append(order, t)
			}
			rec := t.rec
			if ref := rec.Ref(); ref != c.Pod {
				return fmt.Errorf("append %s of pod %s: %w: uid is stored as %s/%s", c.Kind, c.Pod, errdefs.ErrInvalidRecord, ref.Namespace, ref.Name)
			}
			switch c.Kind {
			case KindStatus:
				c.Status = c.Status.DeepCopy()
				if SameStatus(&rec.Pod.Status, c.Status) {
					continue
				}
				rec.Pod.Status = *c.Status
			case KindEvent:
				ev := *c.Event
				if ev.Time.IsZero() {
					ev.Time = st.now
				}
				c.Event = &ev
			}
			r, err := st.appendEntry(tx, c)
			if err != nil {
				return err
			}
			if c.Kind == KindStatus {
				rec.ModRevision = r
				t.changed = true
			}
		}
		for _, t := range order {
			if !t.changed {
				continue
			}
			data, err := encodeRecord(t.rec)
			if err != nil {
				return fmt.Errorf("append status of pod %s: %w", t.rec.Ref(), err)
			}
			if err := pods.Put([]byte(t.rec.Pod.UID), data); err != nil {
				return fmt.Errorf("append status of pod %s: %w", t.rec.Ref(), err)
			}
		}
		rev = st.rev
		return nil
	})
	if err != nil {
		return 0, err
	}
	return rev, nil
}

func validateChange(c Change) error {
	if c.Pod.UID == "" || c.Pod.Namespace == "" || c.Pod.Name == "" {
		return fmt.Errorf("append %s: %w: pod namespace, name and uid are required", c.Kind, errdefs.ErrInvalidRecord)
	}
	switch c.Kind {
	case KindStatus:
		if c.Status == nil {
			return fmt.Errorf("append status of pod %s: %w: no status", c.Pod, errdefs.ErrInvalidRecord)
		}
	case KindEvent:
		switch {
		case c.Event == nil:
			return fmt.Errorf("append event of pod %s: %w: no event", c.Pod, errdefs.ErrInvalidRecord)
		case c.Event.Type != corev1.EventTypeNormal && c.Event.Type != corev1.EventTypeWarning:
			return fmt.Errorf("append event of pod %s: %w: type %q is neither Normal nor Warning", c.Pod, errdefs.ErrInvalidRecord, c.Event.Type)
		case c.Event.Reason == "":
			return fmt.Errorf("append event of pod %s: %w: no reason", c.Pod, errdefs.ErrInvalidRecord)
		}
	case KindDeleted:
		return fmt.Errorf("append deletion of pod %s: %w: Delete records deletions", c.Pod, errdefs.ErrInvalidRecord)
	default:
		return fmt.Errorf("append change of pod %s: %w: unknown kind %q", c.Pod, errdefs.ErrInvalidRecord, c.Kind)
	}
	return nil
}

func (c *Change) subject() string {
	if c.Object != nil {
		return c.Object.String()
	}
	return "pod " + c.Pod.String()
}

// appendEntry writes c with the next revision and queues it for watchers.
func (st *txState) appendEntry(tx *bolt.Tx, c Change) (int64, error) {
	e := Entry{Revision: st.bump(), Time: st.now, Change: c}
	data, err := json.Marshal(&e)
	if err != nil {
		return 0, fmt.Errorf("append %s of %s: %w", c.Kind, c.subject(), err)
	}
	if err := tx.Bucket(bucketLog).Put(revKey(e.Revision), data); err != nil {
		return 0, fmt.Errorf("append %s of %s: %w", c.Kind, c.subject(), err)
	}
	st.count++
	st.bytes += int64(len(data))
	st.entries = append(st.entries, e)
	return e.Revision, nil
}

// autoCompact removes the oldest entries beyond KeepEntries, and then
// while the entries hold more than KeepBytes, keeping the newest one.
func (st *txState) autoCompact(tx *bolt.Tx) error {
	keep, keepBytes := int64(st.s.opts.KeepEntries), st.s.opts.KeepBytes
	c := tx.Bucket(bucketLog).Cursor()
	for k, v := c.First(); k != nil && (st.count > keep || (st.bytes > keepBytes && st.count > 1)); k, v = c.First() {
		n := int64(len(v))
		if err := c.Delete(); err != nil {
			return fmt.Errorf("compact revision log: %w", err)
		}
		st.compact = max(st.compact, keyRevision(k))
		st.count--
		st.bytes -= n
	}
	return nil
}

// Compact removes the log entries up to and including rev and makes rev
// the compaction point. Compacting at or before the current point does
// nothing; a rev past the store's revision is errdefs.ErrFutureRevision.
func (s *Store) Compact(rev int64) error {
	return s.update(func(tx *bolt.Tx, st *txState) error {
		if rev > st.rev {
			return fmt.Errorf("compact at revision %d (store revision %d): %w", rev, st.rev, errdefs.ErrFutureRevision)
		}
		if rev <= st.compact {
			return nil
		}
		c := tx.Bucket(bucketLog).Cursor()
		for k, v := c.First(); k != nil && keyRevision(k) <= rev; k, v = c.First() {
			n := int64(len(v))
			if err := c.Delete(); err != nil {
				return fmt.Errorf("compact at revision %d: %w", rev, err)
			}
			st.count--
			st.bytes -= n
		}
		st.compact = rev
		return nil
	})
}

// Since returns the entries after rev, in revision order. It fails with a
// *errdefs.CompactedError when rev is before the compaction point and with
// errdefs.ErrFutureRevision when rev is past the store's revision.
func (s *Store) Since(rev int64) ([]Entry, error) {
	entries, _, err := s.readLog(rev, 0)
	return entries, err
}

// readLog reads at most limit (all when 0) entries after rev from one
// snapshot, and returns them with the snapshot's revision.
func (s *Store) readLog(rev int64, limit int) ([]Entry, int64, error) {
	var (
		out  []Entry
		snap int64
	)
	if rev < 0 {
		return nil, 0, fmt.Errorf("read revision log after %d: %w: negative revision", rev, errdefs.ErrInvalidRecord)
	}
	err := s.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		snap = getInt(meta, keyRev)
		if compact := getInt(meta, keyCompact); rev < compact {
			return &errdefs.CompactedError{Revision: rev, CompactRevision: compact}
		}
		if rev > snap {
			return fmt.Errorf("read revision log after %d (store revision %d): %w", rev, snap, errdefs.ErrFutureRevision)
		}
		c := tx.Bucket(bucketLog).Cursor()
		for k, v := c.Seek(revKey(rev + 1)); k != nil; k, v = c.Next() {
			e := Entry{Revision: keyRevision(k)}
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode revision log entry %d: %w", e.Revision, err)
			}
			out = append(out, e)
			if limit > 0 && len(out) == limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, snap, nil
}
