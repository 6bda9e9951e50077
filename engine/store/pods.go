package store

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsync/podsync/engine/errdefs"
)

// PodRef names one pod.
type PodRef struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
}

// RefOf returns the reference of pod.
func RefOf(pod *corev1.Pod) PodRef {
	return PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}

func (r PodRef) String() string { return r.Namespace + "/" + r.Name + " (" + string(r.UID) + ")" }

// PodRecord is one desired pod. Put reads Pod, ConfigMaps and Secrets; the
// store sets the other fields.
type PodRecord struct {
	// Pod is the defaulted pod. Required, with namespace, name and UID,
	// which are immutable. Its metadata and spec are those of the last Put
	// (and MarkDeleting); its status is the last one appended, and Put
	// ignores the status it is given.
	Pod *corev1.Pod `json:"pod"`
	// ConfigMaps the pod refers to. Mutable.
	ConfigMaps []*corev1.ConfigMap `json:"configMaps,omitempty"`
	// Secrets the pod refers to. Mutable. In records returned by Get,
	// GetByName, List, Put and MarkDeleting their values are removed (see
	// SecretsRedacted).
	Secrets []*corev1.Secret `json:"secrets,omitempty"`
	// Generation is 1 when the pod is first stored and grows by one with
	// each Put or MarkDeleting that changes the record.
	Generation int64 `json:"generation"`
	// CreatedAt is when the pod was first stored.
	CreatedAt time.Time `json:"createdAt"`
	// Deleting is set by MarkDeleting, together with the pod's
	// deletionTimestamp and deletionGracePeriodSeconds.
	Deleting bool `json:"deleting,omitempty"`
	// CreateRevision is the revision at which the pod was first stored.
	CreateRevision int64 `json:"createRevision"`
	// ModRevision is the revision of the last change of the pod's spec or
	// status (events do not count).
	ModRevision int64 `json:"modRevision"`
	// SecretsRedacted is true when the values of Secrets were removed: such
	// a record must never be used to build containers or volumes.
	SecretsRedacted bool `json:"-"`
}

// Ref returns the pod's reference.
func (r *PodRecord) Ref() PodRef { return RefOf(r.Pod) }

// Filter selects pods in List. The zero value selects every pod.
type Filter struct {
	// Namespace keeps the pods of one namespace; all when empty.
	Namespace string
	// Selector keeps the pods whose labels match; all when nil.
	Selector labels.Selector
	// Phases keeps the pods whose status has one of these phases; all when
	// empty.
	Phases []corev1.PodPhase
}

func (f Filter) match(rec *PodRecord) bool {
	if f.Namespace != "" && rec.Pod.Namespace != f.Namespace {
		return false
	}
	if f.Selector != nil && !f.Selector.Matches(labels.Set(rec.Pod.Labels)) {
		return false
	}
	return len(f.Phases) == 0 || slices.Contains(f.Phases, rec.Pod.Status.Phase)
}

// Put stores the pod of rec with its ConfigMaps and Secrets and returns
// the stored record (secrets redacted). A new pod gets Generation 1; a
// changed one the next generation and a new ModRevision; an unchanged one
// is not written.
//
// Put returns errdefs.ErrInvalidRecord if the pod lacks a namespace, name or UID, its
// UID is stored under another namespace/name, or rec came from a read
// with redacted secrets (SecretsRedacted); errdefs.ErrPodExists if its
// namespace/name is held by another UID; errdefs.ErrPodDeleting if the pod is being
// deleted.
func (s *Store) Put(rec PodRecord) (*PodRecord, error) {
	return s.PutIf(rec, Conditions{})
}

// PutIf is Put under the conditions c, checked against the pod stored
// under rec's namespace/name in the write's transaction: it returns c.Fence's
// *errdefs.LeaseError, or a *errdefs.PreconditionError when the pod is
// not at c.Revision or not c.UID, and writes nothing, before Put's own
// errors.
func (s *Store) PutIf(rec PodRecord, c Conditions) (*PodRecord, error) {
	if err := validateRecord(rec); err != nil {
		return nil, err
	}
	var out []byte
	err := s.update(func(tx *bolt.Tx, st *txState) error {
		if err := checkPodPut(tx, rec, c); err != nil {
			return err
		}
		var err error
		out, err = s.putPodTx(tx, st, rec)
		return err
	})
	if err != nil {
		return nil, err
	}
	return decodeRedacted(out)
}

// PutWithObjects stores the pod of rec under the conditions c and objs
// (as PutObjects, check included) in one transaction, all or none: a
// failed condition or object stores nothing. The objects go first in
// the revision log.
func (s *Store) PutWithObjects(rec PodRecord, c Conditions, objs []ObjectPut, check func(old, next *ObjectRecord) error) (*PodRecord, []ObjectResult, error) {
	if err := validateRecord(rec); err != nil {
		return nil, nil, err
	}
	if err := validatePuts(objs); err != nil {
		return nil, nil, err
	}
	var (
		out   []byte
		datas [][]byte
		flags [][2]bool
	)
	err := s.update(func(tx *bolt.Tx, st *txState) error {
		if err := checkPodPut(tx, rec, c); err != nil {
			return err
		}
		var err error
		if datas, flags, err = s.putObjectsTx(tx, st, objs, check); err != nil {
			return err
		}
		out, err = s.putPodTx(tx, st, rec)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	res, err := objectResults(datas, flags)
	if err != nil {
		return nil, nil, err
	}
	pod, err := decodeRedacted(out)
	return pod, res, err
}

// checkPodPut checks the conditions of rec's put against the pod stored
// under its namespace/name.
func checkPodPut(tx *bolt.Tx, rec PodRecord, c Conditions) error {
	ref := rec.Ref()
	stored, err := podByName(tx, ref.Namespace, ref.Name)
	if err != nil {
		return fmt.Errorf("put pod %s: %w", ref, err)
	}
	if err := checkPod(tx, c, "pod "+ref.Namespace+"/"+ref.Name, stored); err != nil {
		return fmt.Errorf("put pod %s: %w", ref, err)
	}
	return nil
}

// putPodTx is Put's write in tx; it returns the record as stored.
func (s *Store) putPodTx(tx *bolt.Tx, st *txState, rec PodRecord) ([]byte, error) {
	ref := rec.Ref()
	var out []byte
	err := func() error {
		pods, names := tx.Bucket(bucketPods), tx.Bucket(bucketNames)
		if uid := names.Get(nameKey(ref.Namespace, ref.Name)); uid != nil && types.UID(uid) != ref.UID {
			return fmt.Errorf("put pod %s: %w: held by uid %s", ref, errdefs.ErrPodExists, uid)
		}
		pod := *rec.Pod // shallow: only Status is replaced
		next := PodRecord{Pod: &pod, ConfigMaps: rec.ConfigMaps, Secrets: rec.Secrets}
		oldData := pods.Get([]byte(ref.UID))
		if oldData != nil {
			old, err := decodeRecord(oldData)
			if err != nil {
				return fmt.Errorf("put pod %s: %w", ref, err)
			}
			if old.Pod.Namespace != ref.Namespace || old.Pod.Name != ref.Name {
				return fmt.Errorf("put pod %s: %w: uid is stored as %s/%s", ref, errdefs.ErrInvalidRecord, old.Pod.Namespace, old.Pod.Name)
			}
			if old.Deleting {
				return fmt.Errorf("put pod %s: %w", ref, errdefs.ErrPodDeleting)
			}
			pod.Status = old.Pod.Status
			next.Generation, next.CreatedAt = old.Generation, old.CreatedAt
			next.CreateRevision, next.ModRevision = old.CreateRevision, old.ModRevision
			data, err := encodeRecord(&next)
			if err != nil {
				return fmt.Errorf("put pod %s: %w", ref, err)
			}
			if !bytes.HasPrefix(oldData, recordMagic) {
				// Stored as JSON (schema 1): compared in the encoding of
				// today, the same pod is no change.
				if oldData, err = encodeRecord(old); err != nil {
					return fmt.Errorf("put pod %s: %w", ref, err)
				}
			}
			if bytes.Equal(data, oldData) {
				out = bytes.Clone(oldData) // bbolt's memory is valid only in the transaction
				return nil
			}
			next.Generation++
		} else {
			pod.Status = corev1.PodStatus{}
			next.Generation, next.CreatedAt = 1, st.now
		}
		next.ModRevision = st.bump()
		if oldData == nil {
			next.CreateRevision = next.ModRevision
		}
		data, err := encodeRecord(&next)
		if err != nil {
			return fmt.Errorf("put pod %s: %w", ref, err)
		}
		if err := s.checkSize(ref, len(data)); err != nil {
			return err
		}
		if err := pods.Put([]byte(ref.UID), data); err != nil {
			return fmt.Errorf("put pod %s: %w", ref, err)
		}
		if err := names.Put(nameKey(ref.Namespace, ref.Name), []byte(ref.UID)); err != nil {
			return fmt.Errorf("put pod %s: %w", ref, err)
		}
		out = data
		return nil
	}()
	return out, err
}

// checkSize refuses a record of n bytes over Options.MaxRecordBytes.
func (s *Store) checkSize(ref PodRef, n int) error {
	limit := s.opts.MaxRecordBytes
	if n <= limit {
		return nil
	}
	fe := field.TooLong(field.NewPath("pod"), n, limit)
	fe.Detail = fmt.Sprintf("the pod's record (its spec with the ConfigMaps and Secrets it refers to, as stored) is %d bytes, "+
		"more than the node's cap of %d bytes (--max-record-bytes)", n, limit)
	return fmt.Errorf("put pod %s: %w: %w", ref, errdefs.ErrRecordTooLarge, fe)
}

func validateRecord(rec PodRecord) error {
	switch {
	case rec.Pod == nil:
		return fmt.Errorf("put pod: %w: no pod", errdefs.ErrInvalidRecord)
	case rec.SecretsRedacted:
		return fmt.Errorf("put pod %s: %w: the record's secrets are redacted", RefOf(rec.Pod), errdefs.ErrInvalidRecord)
	case rec.Pod.Namespace == "" || rec.Pod.Name == "" || rec.Pod.UID == "":
		return fmt.Errorf("put pod %s: %w: namespace, name and uid are required", RefOf(rec.Pod), errdefs.ErrInvalidRecord)
	}
	for _, cm := range rec.ConfigMaps {
		if cm == nil {
			return fmt.Errorf("put pod %s: %w: nil ConfigMap", RefOf(rec.Pod), errdefs.ErrInvalidRecord)
		}
	}
	for _, sec := range rec.Secrets {
		if sec == nil {
			return fmt.Errorf("put pod %s: %w: nil Secret", RefOf(rec.Pod), errdefs.ErrInvalidRecord)
		}
	}
	return nil
}

// Get returns the pod with uid, its secrets redacted, or errdefs.ErrPodNotFound.
func (s *Store) Get(uid types.UID) (*PodRecord, error) {
	rec, err := s.get(uid)
	if err != nil {
		return nil, err
	}
	redact(rec)
	return rec, nil
}

// GetWithSecrets returns the pod with uid and the data of its Secrets, or
// errdefs.ErrPodNotFound. Use it only to build the pod's containers and write its
// volume files; answer callers with Get.
func (s *Store) GetWithSecrets(uid types.UID) (*PodRecord, error) {
	return s.get(uid)
}

func (s *Store) get(uid types.UID) (*PodRecord, error) {
	var rec *PodRecord
	err := s.view(func(tx *bolt.Tx) error {
		data := tx.Bucket(bucketPods).Get([]byte(uid))
		if data == nil {
			return fmt.Errorf("get pod uid %s: %w", uid, errdefs.ErrPodNotFound)
		}
		var err error
		rec, err = decodeRecord(data)
		return err
	})
	return rec, err
}

// GetByName returns the pod namespace/name, its secrets redacted, or
// errdefs.ErrPodNotFound.
func (s *Store) GetByName(namespace, name string) (*PodRecord, error) {
	return s.getByName(namespace, name, s.decoded.redacted)
}

// GetByNameShared is GetByName whose record is shared with the store's
// cache and other callers, as ListShared's are: the same record while the
// pod's stored bytes are unchanged, and a new one after any write. It spares
// a copy of the pod to callers that only read the record, which must not
// change it.
func (s *Store) GetByNameShared(namespace, name string) (*PodRecord, error) {
	return s.getByName(namespace, name, s.decoded.shared)
}

func (s *Store) getByName(namespace, name string, decode func(uid, data []byte) (*PodRecord, error)) (*PodRecord, error) {
	var rec *PodRecord
	err := s.view(func(tx *bolt.Tx) error {
		uid := tx.Bucket(bucketNames).Get(nameKey(namespace, name))
		if uid == nil {
			return fmt.Errorf("get pod %s/%s: %w", namespace, name, errdefs.ErrPodNotFound)
		}
		data := tx.Bucket(bucketPods).Get(uid)
		if data == nil {
			return fmt.Errorf("get pod %s/%s: name index names missing uid %s", namespace, name, uid)
		}
		var err error
		rec, err = decode(uid, data)
		return err
	})
	return rec, err
}

// List returns the pods that f selects, ordered by namespace and name,
// their secrets redacted, and the revision of the snapshot they were read
// from: watching from that revision misses no later change.
func (s *Store) List(f Filter) ([]*PodRecord, int64, error) {
	return s.list(f, s.decoded.redacted)
}

// ListShared is List whose records are shared with the store's cache and
// other callers: cheaper for callers that only read them, which must not
// change them.
func (s *Store) ListShared(f Filter) ([]*PodRecord, int64, error) {
	return s.list(f, s.decoded.shared)
}

func (s *Store) list(f Filter, decode func(uid, data []byte) (*PodRecord, error)) ([]*PodRecord, int64, error) {
	var (
		out []*PodRecord
		rev int64
	)
	err := s.view(func(tx *bolt.Tx) error {
		rev = getInt(tx.Bucket(bucketMeta), keyRev)
		pods := tx.Bucket(bucketPods)
		c := tx.Bucket(bucketNames).Cursor()
		var prefix []byte
		if f.Namespace != "" {
			prefix = append([]byte(f.Namespace), 0)
		}
		for k, uid := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, uid = c.Next() {
			data := pods.Get(uid)
			if data == nil {
				return fmt.Errorf("list pods: name index names missing uid %s", uid)
			}
			rec, err := decode(uid, data)
			if err != nil {
				return err
			}
			if f.match(rec) {
				out = append(out, rec)
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, rev, nil
}

// MarkDeleting records that the pod with uid is being deleted, as the API
// server does: it sets Deleting, the pod's deletionGracePeriodSeconds
// (gracePeriodSeconds, or the pod's terminationGracePeriodSeconds when
// nil) and deletionTimestamp (now plus the grace period). Marking a pod
// again only shortens its grace period. It returns the record (secrets
// redacted), or errdefs.ErrPodNotFound.
func (s *Store) MarkDeleting(uid types.UID, gracePeriodSeconds *int64) (*PodRecord, error) {
	return s.MarkDeletingIf(uid, gracePeriodSeconds, Conditions{})
}

// MarkDeletingIf is MarkDeleting under the conditions c, checked in its
// transaction: c.Fence's *errdefs.LeaseError, or a
// *errdefs.PreconditionError when the pod is not at c.Revision or not
// c.UID; nothing is written then.
func (s *Store) MarkDeletingIf(uid types.UID, gracePeriodSeconds *int64, c Conditions) (*PodRecord, error) {
	if gracePeriodSeconds != nil && *gracePeriodSeconds < 0 {
		return nil, fmt.Errorf("mark pod uid %s deleting: %w: negative grace period", uid, errdefs.ErrInvalidRecord)
	}
	var out []byte
	err := s.update(func(tx *bolt.Tx, st *txState) error {
		pods := tx.Bucket(bucketPods)
		data := pods.Get([]byte(uid))
		if data == nil {
			return fmt.Errorf("mark pod uid %s deleting: %w", uid, errdefs.ErrPodNotFound)
		}
		rec, err := decodeRecord(data)
		if err != nil {
			return err
		}
		if err := checkPod(tx, c, "pod "+rec.Pod.Namespace+"/"+rec.Pod.Name, rec); err != nil {
			return fmt.Errorf("mark pod %s deleting: %w", rec.Ref(), err)
		}
		grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
		switch {
		case gracePeriodSeconds != nil:
			grace = *gracePeriodSeconds
		case rec.Pod.Spec.TerminationGracePeriodSeconds != nil:
			grace = *rec.Pod.Spec.TerminationGracePeriodSeconds
		}
		if rec.Deleting && rec.Pod.DeletionGracePeriodSeconds != nil && *rec.Pod.DeletionGracePeriodSeconds <= grace {
			out = bytes.Clone(data) // bbolt's memory is valid only in the transaction
			return nil
		}
		// As the API server: the deletion was requested at deadline-grace;
		// a shorter grace period moves the deadline from that instant.
		requested := st.now
		if rec.Deleting && rec.Pod.DeletionTimestamp != nil && rec.Pod.DeletionGracePeriodSeconds != nil {
			requested = rec.Pod.DeletionTimestamp.Add(-time.Duration(*rec.Pod.DeletionGracePeriodSeconds) * time.Second)
		}
		deadline := metav1.NewTime(requested.Add(time.Duration(grace) * time.Second))
		rec.Deleting = true
		rec.Pod.DeletionTimestamp = &deadline
		rec.Pod.DeletionGracePeriodSeconds = &grace
		rec.Generation++
		rec.ModRevision = st.bump()
		if out, err = encodeRecord(rec); err != nil {
			return fmt.Errorf("mark pod %s deleting: %w", rec.Ref(), err)
		}
		return pods.Put([]byte(uid), out)
	})
	if err != nil {
		return nil, err
	}
	return decodeRedacted(out)
}

// Delete removes the pod with uid and records its deletion in the revision
// log, in one transaction. It returns the deletion's revision, or
// errdefs.ErrPodNotFound.
func (s *Store) Delete(uid types.UID) (int64, error) {
	var rev int64
	err := s.update(func(tx *bolt.Tx, st *txState) error {
		pods := tx.Bucket(bucketPods)
		data := pods.Get([]byte(uid))
		if data == nil {
			return fmt.Errorf("delete pod uid %s: %w", uid, errdefs.ErrPodNotFound)
		}
		rec, err := decodeRecord(data)
		if err != nil {
			return err
		}
		ref := rec.Ref()
		if err := pods.Delete([]byte(uid)); err != nil {
			return fmt.Errorf("delete pod %s: %w", ref, err)
		}
		if err := tx.Bucket(bucketNames).Delete(nameKey(ref.Namespace, ref.Name)); err != nil {
			return fmt.Errorf("delete pod %s: %w", ref, err)
		}
		rev, err = st.appendEntry(tx, Change{Kind: KindDeleted, Pod: ref, Labels: rec.Pod.Labels})
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketDeleted).Put([]byte(uid), revKey(rev)); err != nil {
			return fmt.Errorf("delete pod %s: %w", ref, err)
		}
		return nil
	})
	if err == nil {
		s.decoded.forget(string(uid))
	}
	return rev, err
}

// Deleted reports whether Delete removed the pod with uid and
// ForgetDeleted has not forgotten it since: podsync's objects of such a
// pod that the runtime still holds are leftovers of the node's own
// deletion, which it may remove, where those of a pod the store never
// held are orphans.
func (s *Store) Deleted(uid types.UID) (bool, error) {
	var found bool
	err := s.view(func(tx *bolt.Tx) error {
		found = tx.Bucket(bucketDeleted).Get([]byte(uid)) != nil
		return nil
	})
	return found, err
}

// ForgetDeleted forgets the deletions recorded at or before revision rev
// of the pods for which keep returns false (the runtime holds nothing of
// them), and returns how many it forgot.
func (s *Store) ForgetDeleted(rev int64, keep func(types.UID) bool) (int, error) {
	var n int
	err := s.update(func(tx *bolt.Tx, _ *txState) error {
		b := tx.Bucket(bucketDeleted)
		var forget [][]byte
		if err := b.ForEach(func(k, v []byte) error {
			after := len(v) == 8 && keyRevision(v) > rev
			if !after && !keep(types.UID(k)) {
				forget = append(forget, bytes.Clone(k))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, k := range forget {
			if err := b.Delete(k); err != nil {
				return fmt.Errorf("forget deleted pods: %w", err)
			}
		}
		n = len(forget)
		return nil
	})
	return n, err
}

// podByName returns the pod stored under namespace/name in tx, or nil.
func podByName(tx *bolt.Tx, namespace, name string) (*PodRecord, error) {
	uid := tx.Bucket(bucketNames).Get(nameKey(namespace, name))
	if uid == nil {
		return nil, nil
	}
	data := tx.Bucket(bucketPods).Get(uid)
	if data == nil {
		return nil, fmt.Errorf("name index names missing uid %s", uid)
	}
	return decodeRecord(data)
}

// nameKey is the key of the name index. NUL separates namespace and name,
// so keys sort by namespace, then name.
func nameKey(namespace, name string) []byte {
	k := make([]byte, 0, len(namespace)+1+len(name))
	k = append(k, namespace...)
	k = append(k, 0)
	return append(k, name...)
}

func decodeRedacted(data []byte) (*PodRecord, error) {
	rec, err := decodeRecord(data)
	if err != nil {
		return nil, err
	}
	redact(rec)
	return rec, nil
}

// redact removes the values of rec's secrets, keeping their keys, and the
// last-applied-configuration annotation, which holds them too.
func redact(rec *PodRecord) {
	for _, s := range rec.Secrets {
		for k := range s.Data {
			s.Data[k] = nil
		}
		for k := range s.StringData {
			s.StringData[k] = ""
		}
		delete(s.Annotations, corev1.LastAppliedConfigAnnotation)
	}
	rec.SecretsRedacted = true
}
