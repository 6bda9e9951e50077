package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/failpoint"
)

// bucketObjects holds the node's stored ConfigMaps and Secrets:
// kind \x00 namespace \x00 name -> ObjectRecord (JSON).
var bucketObjects = []byte("objects")

// ObjectKind is the kind of a stored object.
type ObjectKind string

// Kinds of stored objects.
const (
	KindConfigMap ObjectKind = "ConfigMap"
	KindSecret    ObjectKind = "Secret"
)

// ObjectRef names one stored object.
type ObjectRef struct {
	Kind      ObjectKind `json:"kind"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
}

func (r ObjectRef) String() string { return string(r.Kind) + " " + r.Namespace + "/" + r.Name }

func (r ObjectRef) key() []byte {
	k := make([]byte, 0, len(r.Kind)+len(r.Namespace)+len(r.Name)+2)
	k = append(k, r.Kind...)
	k = append(k, 0)
	k = append(k, r.Namespace...)
	k = append(k, 0)
	return append(k, r.Name...)
}

// ObjectRecord is one stored ConfigMap or Secret: exactly one of
// ConfigMap and Secret is set. Its object's metadata.resourceVersion is
// ModRevision, set on the way out.
type ObjectRecord struct {
	ConfigMap *corev1.ConfigMap `json:"configMap,omitempty"`
	Secret    *corev1.Secret    `json:"secret,omitempty"`
	// CreatedAt is when the object was first stored.
	CreatedAt time.Time `json:"createdAt"`
	// CreateRevision and ModRevision are the revisions of the object's
	// creation and of its last change.
	CreateRevision int64 `json:"createRevision"`
	ModRevision    int64 `json:"modRevision"`
	// SecretsRedacted is true when the Secret's values were removed.
	SecretsRedacted bool `json:"-"`
}

// Ref returns the record's reference.
func (r *ObjectRecord) Ref() ObjectRef {
	if r.Secret != nil {
		return ObjectRef{Kind: KindSecret, Namespace: r.Secret.Namespace, Name: r.Secret.Name}
	}
	return ObjectRef{Kind: KindConfigMap, Namespace: r.ConfigMap.Namespace, Name: r.ConfigMap.Name}
}

// Meta returns the stored object's metadata.
func (r *ObjectRecord) Meta() *metav1.ObjectMeta {
	if r.Secret != nil {
		return &r.Secret.ObjectMeta
	}
	return &r.ConfigMap.ObjectMeta
}

// Immutable reports whether the object is immutable.
func (r *ObjectRecord) Immutable() bool {
	if r.Secret != nil {
		return r.Secret.Immutable != nil && *r.Secret.Immutable
	}
	return r.ConfigMap.Immutable != nil && *r.ConfigMap.Immutable
}

// stamp sets the object's resourceVersion and creationTimestamp from
// the record, as the API returns them.
func (r *ObjectRecord) stamp() {
	m := r.Meta()
	m.ResourceVersion = r.ResourceVersion()
	m.CreationTimestamp = metav1.NewTime(r.CreatedAt)
}

// ResourceVersion is ModRevision as the API writes it.
func (r *ObjectRecord) ResourceVersion() string { return strconv.FormatInt(r.ModRevision, 10) }

// ObjectPut is one object for PutObjects: ConfigMap or Secret, defaulted
// and valid.
type ObjectPut struct {
	ConfigMap *corev1.ConfigMap
	Secret    *corev1.Secret
	// ResourceVersion, when not empty, is a precondition: the object must
	// be stored at that version ("0": not stored at all).
	ResourceVersion string
}

func (p ObjectPut) record() ObjectRecord {
	if p.Secret != nil {
		s := p.Secret.DeepCopy()
		s.ResourceVersion, s.CreationTimestamp = "", metav1.Time{}
		return ObjectRecord{Secret: s}
	}
	cm := p.ConfigMap.DeepCopy()
	cm.ResourceVersion, cm.CreationTimestamp = "", metav1.Time{}
	return ObjectRecord{ConfigMap: cm}
}

// ObjectResult is what PutObjects did with one object.
type ObjectResult struct {
	// Record is the object as stored, its Secret's values removed.
	Record *ObjectRecord
	// Created is true for an object not stored before; Changed for one
	// created or whose content changed.
	Created, Changed bool
}

// ObjectFilter selects objects in ListObjects. The zero value selects
// every object.
type ObjectFilter struct {
	// Kind keeps one kind; both when empty.
	Kind ObjectKind
	// Namespace keeps one namespace; all when empty.
	Namespace string
	// Selector keeps the objects whose labels match; all when nil.
	Selector labels.Selector
}

// PutObjects stores objects in one transaction, all or none, idempotently
// by kind, namespace and name: a new one is created, a changed one gets a
// new ModRevision, an unchanged one is not written. Each write records an
// entry of KindObjectApplied (its Secret's values removed) in the revision
// log. check, if not nil, is called with the stored record (nil when new)
// and the next one before a write, and its error refuses the write.
//
// PutObjects returns errdefs.ErrInvalidRecord for an object without
// namespace and name, a *errdefs.PreconditionError when a ResourceVersion
// precondition fails, an errdefs.ErrInvalidSpec with a *field.Error for a
// change of an immutable object, and errdefs.ErrRecordTooLarge for an
// object over Options.MaxRecordBytes.
func (s *Store) PutObjects(objs []ObjectPut, check func(old, next *ObjectRecord) error) ([]ObjectResult, error) {
	return s.PutObjectsFenced(objs, check, nil)
}

// PutObjectsFenced is PutObjects under the lease condition f, checked in
// its transaction (a *errdefs.LeaseError refuses every object).
func (s *Store) PutObjectsFenced(objs []ObjectPut, check func(old, next *ObjectRecord) error, f *Fence) ([]ObjectResult, error) {
	if err := validatePuts(objs); err != nil {
		return nil, err
	}
	// A repeated apply (RunPods hands a request's objects to each of its
	// pods' applies) is answered from a snapshot, without a commit.
	if res, ok, err := s.unchangedObjects(objs, check, f); err != nil || ok {
		return res, err
	}
	var datas [][]byte
	var flags [][2]bool
	err := s.update(func(tx *bolt.Tx, st *txState) error {
		if err := checkFence(tx, f); err != nil {
			return fmt.Errorf("put objects: %w", err)
		}
		var err error
		datas, flags, err = s.putObjectsTx(tx, st, objs, check)
		return err
	})
	if err != nil {
		return nil, err
	}
	return objectResults(datas, flags)
}

// validatePuts refuses puts without exactly one object, or of an object
// without namespace and name.
func validatePuts(objs []ObjectPut) error {
	for _, o := range objs {
		if (o.ConfigMap == nil) == (o.Secret == nil) {
			return fmt.Errorf("put object: %w: exactly one of ConfigMap and Secret", errdefs.ErrInvalidRecord)
		}
		if rec := o.record(); rec.Meta().Namespace == "" || rec.Meta().Name == "" {
			return fmt.Errorf("put object: %w: namespace and name are required", errdefs.ErrInvalidRecord)
		}
	}
	return nil
}

// objectResults decodes what putObjectsTx stored.
func objectResults(datas [][]byte, flags [][2]bool) ([]ObjectResult, error) {
	out := make([]ObjectResult, len(datas))
	for i, data := range datas {
		rec, err := decodeObject(data)
		if err != nil {
			return nil, err
		}
		redactObject(rec)
		rec.stamp()
		out[i] = ObjectResult{Record: rec, Created: flags[i][0], Changed: flags[i][1]}
	}
	return out, nil
}

// putObjectsTx is PutObjects' write in tx: the records as stored and,
// for each, whether it was created and changed.
func (s *Store) putObjectsTx(tx *bolt.Tx, st *txState, objs []ObjectPut, check func(old, next *ObjectRecord) error) ([][]byte, [][2]bool, error) {
	var datas [][]byte
	var flags [][2]bool
	err := func() error {
		b := tx.Bucket(bucketObjects)
		for _, o := range objs {
			next := o.record()
			ref := next.Ref()
			oldData := b.Get(ref.key())
			var old *ObjectRecord
			if oldData != nil {
				var err error
				if old, err = decodeObject(oldData); err != nil {
					return fmt.Errorf("put %s: %w", ref, err)
				}
			}
			if err := checkVersion(ref, old, o.ResourceVersion); err != nil {
				return err
			}
			if check != nil {
				if err := check(old, &next); err != nil {
					return err
				}
			}
			if old != nil {
				if err := checkImmutable(old, &next); err != nil {
					return fmt.Errorf("put %s: %w", ref, err)
				}
				next.CreatedAt, next.CreateRevision, next.ModRevision = old.CreatedAt, old.CreateRevision, old.ModRevision
				data, err := json.Marshal(&next)
				if err != nil {
					return fmt.Errorf("put %s: %w", ref, err)
				}
				if bytes.Equal(data, oldData) {
					datas = append(datas, bytes.Clone(oldData))
					flags = append(flags, [2]bool{false, false})
					continue
				}
			} else {
				next.CreatedAt = st.now
			}
			// The object's version is the revision of its log entry.
			next.ModRevision = st.rev + 1
			if old == nil {
				next.CreateRevision = next.ModRevision
			}
			data, err := json.Marshal(&next)
			if err != nil {
				return fmt.Errorf("put %s: %w", ref, err)
			}
			if err := s.checkObjectSize(ref, len(data)); err != nil {
				return err
			}
			if err := b.Put(ref.key(), data); err != nil {
				return fmt.Errorf("put %s: %w", ref, err)
			}
			red := next.deepCopy()
			redactObject(red)
			red.stamp()
			if _, err := st.appendEntry(tx, Change{Kind: KindObjectApplied, Object: &ref, ConfigMap: red.ConfigMap, Secret: red.Secret}); err != nil {
				return err
			}
			datas = append(datas, data)
			flags = append(flags, [2]bool{old == nil, true})
		}
		return nil
	}()
	return datas, flags, err
}

// unchangedObjects reports whether every object of objs is stored as
// given, and then returns PutObjects' results.
func (s *Store) unchangedObjects(objs []ObjectPut, check func(old, next *ObjectRecord) error, f *Fence) ([]ObjectResult, bool, error) {
	var out []ObjectResult
	unchanged := true
	err := s.view(func(tx *bolt.Tx) error {
		if err := checkFence(tx, f); err != nil {
			return fmt.Errorf("put objects: %w", err)
		}
		b := tx.Bucket(bucketObjects)
		for _, o := range objs {
			next := o.record()
			ref := next.Ref()
			oldData := b.Get(ref.key())
			if oldData == nil {
				unchanged = false
				return nil
			}
			old, err := decodeObject(oldData)
			if err != nil {
				return fmt.Errorf("put %s: %w", ref, err)
			}
			if err := checkVersion(ref, old, o.ResourceVersion); err != nil {
				return err
			}
			if check != nil {
				if err := check(old, &next); err != nil {
					return err
				}
			}
			next.CreatedAt, next.CreateRevision, next.ModRevision = old.CreatedAt, old.CreateRevision, old.ModRevision
			data, err := json.Marshal(&next)
			if err != nil {
				return fmt.Errorf("put %s: %w", ref, err)
			}
			if !bytes.Equal(data, oldData) {
				unchanged = false
				return nil
			}
			redactObject(old)
			old.stamp()
			out = append(out, ObjectResult{Record: old})
		}
		return nil
	})
	if err != nil || !unchanged {
		return nil, false, err
	}
	return out, true, nil
}

func checkVersion(ref ObjectRef, old *ObjectRecord, want string) error {
	if want == "" {
		return nil
	}
	have := "0"
	var rev int64
	if old != nil {
		have, rev = old.ResourceVersion(), old.ModRevision
	}
	if have == want || failpoint.Skip(failpoint.SkipPreconditions) {
		return nil
	}
	wanted := "at resourceVersion " + want
	if want == "0" {
		wanted = "absent"
	}
	return &errdefs.PreconditionError{Kind: errdefs.RevisionMismatch, What: ref.String(), Revision: rev, Want: wanted}
}

// checkImmutable refuses a change of an immutable object's data, as the
// API server's ValidateConfigMapUpdate and ValidateSecretUpdate do.
func checkImmutable(old, next *ObjectRecord) error {
	if !old.Immutable() {
		return nil
	}
	var same bool
	var what string
	if old.Secret != nil {
		same = reflect.DeepEqual(old.Secret.Data, next.Secret.Data) && next.Immutable()
		what = "Secret"
	} else {
		same = maps.Equal(old.ConfigMap.Data, next.ConfigMap.Data) &&
			reflect.DeepEqual(old.ConfigMap.BinaryData, next.ConfigMap.BinaryData) && next.Immutable()
		what = "ConfigMap"
	}
	if same {
		return nil
	}
	fe := field.Forbidden(field.NewPath("data"), fmt.Sprintf("field is immutable when `immutable` is set: delete the %s and create it again to change it", what))
	return fmt.Errorf("%w: %w", fe, errdefs.ErrInvalidSpec)
}

// checkObjectSize refuses an object of n bytes over Options.MaxRecordBytes.
func (s *Store) checkObjectSize(ref ObjectRef, n int) error {
	limit := s.opts.MaxRecordBytes
	if n <= limit {
		return nil
	}
	fe := field.TooLong(field.NewPath("data"), n, limit)
	fe.Detail = fmt.Sprintf("the %s as stored is %d bytes, more than the node's cap of %d bytes (--max-record-bytes)", ref, n, limit)
	return fmt.Errorf("put %s: %w: %w", ref, errdefs.ErrRecordTooLarge, fe)
}

// GetObject returns the stored object ref, its Secret's values removed,
// or errdefs.ErrObjectNotFound.
func (s *Store) GetObject(ref ObjectRef) (*ObjectRecord, error) {
	rec, err := s.getObject(ref)
	if err != nil {
		return nil, err
	}
	redactObject(rec)
	return rec, nil
}

// GetObjectWithSecrets is GetObject with the Secret's values: use it only
// to build containers and volume files.
func (s *Store) GetObjectWithSecrets(ref ObjectRef) (*ObjectRecord, error) {
	return s.getObject(ref)
}

func (s *Store) getObject(ref ObjectRef) (*ObjectRecord, error) {
	var rec *ObjectRecord
	err := s.view(func(tx *bolt.Tx) error {
		data := tx.Bucket(bucketObjects).Get(ref.key())
		if data == nil {
			return fmt.Errorf("get %s: %w", ref, errdefs.ErrObjectNotFound)
		}
		var err error
		rec, err = decodeObject(data)
		return err
	})
	if err != nil {
		return nil, err
	}
	rec.stamp()
	return rec, nil
}

// ObjectsWithSecrets returns the stored ConfigMaps and Secrets among refs
// (the missing ones are left out), with the Secrets' values, from one
// snapshot: what a pass of a pod that refers to them builds with.
func (s *Store) ObjectsWithSecrets(refs []ObjectRef) ([]*corev1.ConfigMap, []*corev1.Secret, error) {
	var (
		cms     []*corev1.ConfigMap
		secrets []*corev1.Secret
	)
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObjects)
		for _, ref := range refs {
			data := b.Get(ref.key())
			if data == nil {
				continue
			}
			rec, err := decodeObject(data)
			if err != nil {
				return err
			}
			rec.stamp()
			if rec.Secret != nil {
				secrets = append(secrets, rec.Secret)
			} else {
				cms = append(cms, rec.ConfigMap)
			}
		}
		return nil
	})
	return cms, secrets, err
}

// ListObjects returns the objects f selects, ConfigMaps first, each kind
// ordered by namespace and name, Secrets' values removed, and the revision
// of the snapshot.
func (s *Store) ListObjects(f ObjectFilter) ([]*ObjectRecord, int64, error) {
	var (
		out []*ObjectRecord
		rev int64
	)
	err := s.view(func(tx *bolt.Tx) error {
		rev = getInt(tx.Bucket(bucketMeta), keyRev)
		c := tx.Bucket(bucketObjects).Cursor()
		for _, kind := range []ObjectKind{KindConfigMap, KindSecret} {
			if f.Kind != "" && f.Kind != kind {
				continue
			}
			prefix := append([]byte(kind), 0)
			if f.Namespace != "" {
				prefix = append(append(prefix, f.Namespace...), 0)
			}
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				rec, err := decodeObject(v)
				if err != nil {
					return err
				}
				if f.Selector != nil && !f.Selector.Matches(labels.Set(rec.Meta().Labels)) {
					continue
				}
				redactObject(rec)
				rec.stamp()
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

// DeleteObject removes the stored object ref and records the deletion
// (KindObjectDeleted) in the revision log, in one transaction. It returns
// the deletion's revision, or errdefs.ErrObjectNotFound; resourceVersion,
// when not empty, must be the stored one (a *errdefs.PreconditionError).
// check, if not nil, may refuse the deletion of the stored record.
func (s *Store) DeleteObject(ref ObjectRef, resourceVersion string, check func(old *ObjectRecord) error) (int64, error) {
	return s.DeleteObjectFenced(ref, resourceVersion, check, nil)
}

// DeleteObjectFenced is DeleteObject under the lease condition f, checked
// in its transaction.
func (s *Store) DeleteObjectFenced(ref ObjectRef, resourceVersion string, check func(old *ObjectRecord) error, f *Fence) (int64, error) {
	var rev int64
	err := s.update(func(tx *bolt.Tx, st *txState) error {
		if err := checkFence(tx, f); err != nil {
			return fmt.Errorf("delete %s: %w", ref, err)
		}
		b := tx.Bucket(bucketObjects)
		data := b.Get(ref.key())
		if data == nil {
			return fmt.Errorf("delete %s: %w", ref, errdefs.ErrObjectNotFound)
		}
		old, err := decodeObject(data)
		if err != nil {
			return err
		}
		if err := checkVersion(ref, old, resourceVersion); err != nil {
			return err
		}
		if check != nil {
			if err := check(old); err != nil {
				return err
			}
		}
		if err := b.Delete(ref.key()); err != nil {
			return fmt.Errorf("delete %s: %w", ref, err)
		}
		rev, err = st.appendEntry(tx, Change{Kind: KindObjectDeleted, Object: &ref, Labels: old.Meta().Labels})
		return err
	})
	return rev, err
}

func decodeObject(data []byte) (*ObjectRecord, error) {
	rec := &ObjectRecord{}
	if err := json.Unmarshal(data, rec); err != nil {
		return nil, fmt.Errorf("decode object record: %w", err)
	}
	if (rec.ConfigMap == nil) == (rec.Secret == nil) {
		return nil, fmt.Errorf("decode object record: %w: neither a ConfigMap nor a Secret", errdefs.ErrStoreCorrupt)
	}
	return rec, nil
}

func (r *ObjectRecord) deepCopy() *ObjectRecord {
	out := *r
	out.ConfigMap = r.ConfigMap.DeepCopy()
	out.Secret = r.Secret.DeepCopy()
	return &out
}

// redactObject removes a Secret's values, keeping its keys.
func redactObject(rec *ObjectRecord) {
	if s := rec.Secret; s != nil {
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
