package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/errdefs"
)

// A pod record is stored as recordMagic and a protobuf message of the
// fields below, its pod, ConfigMaps and Secrets in the Kubernetes API's
// own protobuf encoding (k8s.io/api's generated Marshal, what the API
// server keeps in etcd), each with its apiVersion and kind, which that
// encoding leaves to an envelope. Decoding one costs a sixth of the JSON
// that schema 1 stored, and a pass decodes and encodes its pod's record
// several times. Records stored as JSON (schema 1) still decode: a store
// is upgraded record by record, as each is written.
//
// The magic cannot begin a JSON record, which begins with '{'. Protobuf
// of the API's types is deterministic (map keys sorted), so equal records
// encode to equal bytes, as Put's no-change check needs.
var recordMagic = []byte("psr\x00")

// The record's fields.
const (
	recPod            protowire.Number = 1 // object
	recConfigMap      protowire.Number = 2 // object, repeated
	recSecret         protowire.Number = 3 // object, repeated
	recGeneration     protowire.Number = 4 // varint
	recCreatedSeconds protowire.Number = 5 // varint (int64), CreatedAt's Unix seconds
	recCreatedNanos   protowire.Number = 6 // varint, CreatedAt's nanoseconds
	recDeleting       protowire.Number = 7 // varint (bool)
	recCreateRevision protowire.Number = 8 // varint
	recModRevision    protowire.Number = 9 // varint
	objAPIVersion     protowire.Number = 1 // an object's fields: string
	objKind           protowire.Number = 2 // string
	objRaw            protowire.Number = 3 // bytes, the type's protobuf
)

// apiObject is what an object of a record is in k8s.io/api: the protobuf
// methods the codec calls (its apiVersion and kind go beside it).
type apiObject interface {
	MarshalToSizedBuffer([]byte) (int, error)
	Unmarshal([]byte) error
}

// encodeRecord encodes rec as the store keeps it.
func encodeRecord(rec *PodRecord) ([]byte, error) {
	if rec.Pod == nil {
		return nil, fmt.Errorf("encode pod record: %w: no pod", errdefs.ErrInvalidRecord)
	}
	podSize := rec.Pod.Size()
	b := make([]byte, 0, 64+podSize)
	b = append(b, recordMagic...)
	var err error
	if b, err = appendObject(b, recPod, rec.Pod.APIVersion, rec.Pod.Kind, rec.Pod, podSize); err != nil {
		return nil, err
	}
	for _, cm := range rec.ConfigMaps {
		if b, err = appendObject(b, recConfigMap, cm.APIVersion, cm.Kind, cm, cm.Size()); err != nil {
			return nil, err
		}
	}
	for _, s := range rec.Secrets {
		if b, err = appendObject(b, recSecret, s.APIVersion, s.Kind, s, s.Size()); err != nil {
			return nil, err
		}
	}
	b = appendInt(b, recGeneration, rec.Generation)
	if !rec.CreatedAt.IsZero() {
		b = appendInt(b, recCreatedSeconds, rec.CreatedAt.Unix())
		b = appendInt(b, recCreatedNanos, int64(rec.CreatedAt.Nanosecond()))
	}
	if rec.Deleting {
		b = appendInt(b, recDeleting, 1)
	}
	b = appendInt(b, recCreateRevision, rec.CreateRevision)
	b = appendInt(b, recModRevision, rec.ModRevision)
	return b, nil
}

func appendInt(b []byte, n protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

// appendObject appends obj, whose protobuf is size bytes (its Size), as
// field n: the caller has its size already.
func appendObject(b []byte, n protowire.Number, apiVersion, kind string, obj apiObject, size int) ([]byte, error) {
	inner := 0
	if apiVersion != "" {
		inner += protowire.SizeTag(objAPIVersion) + protowire.SizeBytes(len(apiVersion))
	}
	if kind != "" {
		inner += protowire.SizeTag(objKind) + protowire.SizeBytes(len(kind))
	}
	inner += protowire.SizeTag(objRaw) + protowire.SizeBytes(size)
	b = protowire.AppendTag(b, n, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(inner))
	if apiVersion != "" {
		b = protowire.AppendTag(b, objAPIVersion, protowire.BytesType)
		b = protowire.AppendString(b, apiVersion)
	}
	if kind != "" {
		b = protowire.AppendTag(b, objKind, protowire.BytesType)
		b = protowire.AppendString(b, kind)
	}
	b = protowire.AppendTag(b, objRaw, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	start := len(b)
	b = append(b, make([]byte, size)...)
	if _, err := obj.MarshalToSizedBuffer(b[start:]); err != nil {
		return nil, fmt.Errorf("encode pod record: %w", err)
	}
	return b, nil
}

// SameStatus reports whether a and b are the same status as the store
// keeps it: equal in the API's protobuf, which is deterministic and, as
// its JSON, keeps times to the second. Append drops a status that is the
// same as the stored one; the pod workers ask it too.
func SameStatus(a, b *corev1.PodStatus) bool {
	pa, err1 := a.Marshal()
	pb, err2 := b.Marshal()
	return err1 == nil && err2 == nil && bytes.Equal(pa, pb)
}

// decodeRecord decodes a stored pod record, of either schema.
func decodeRecord(data []byte) (*PodRecord, error) {
	rec := &PodRecord{}
	if bytes.HasPrefix(data, recordMagic) {
		if err := rec.unmarshal(data[len(recordMagic):]); err != nil {
			return nil, fmt.Errorf("decode pod record: %w", err)
		}
	} else if err := json.Unmarshal(data, rec); err != nil {
		return nil, fmt.Errorf("decode pod record: %w", err)
	}
	if rec.Pod == nil {
		return nil, fmt.Errorf("decode pod record: %w: no pod", errdefs.ErrStoreCorrupt)
	}
	return rec, nil
}

func (rec *PodRecord) unmarshal(b []byte) error {
	var createdSec, createdNsec int64
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		switch {
		case typ == protowire.BytesType && (n == recPod || n == recConfigMap || n == recSecret):
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			b = b[l:]
			switch n {
			case recPod:
				if rec.Pod != nil {
					return errors.New("two pods")
				}
				rec.Pod = &corev1.Pod{}
				if err := unmarshalObject(v, &rec.Pod.APIVersion, &rec.Pod.Kind, rec.Pod); err != nil {
					return fmt.Errorf("pod: %w", err)
				}
			case recConfigMap:
				cm := &corev1.ConfigMap{}
				if err := unmarshalObject(v, &cm.APIVersion, &cm.Kind, cm); err != nil {
					return fmt.Errorf("configMap: %w", err)
				}
				rec.ConfigMaps = append(rec.ConfigMaps, cm)
			default:
				s := &corev1.Secret{}
				if err := unmarshalObject(v, &s.APIVersion, &s.Kind, s); err != nil {
					return fmt.Errorf("secret: %w", err)
				}
				rec.Secrets = append(rec.Secrets, s)
			}
		case typ == protowire.VarintType:
			u, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			b = b[l:]
			v := int64(u) //nolint:gosec // two's complement, as appendInt wrote it
			switch n {
			case recGeneration:
				rec.Generation = v
			case recCreatedSeconds:
				createdSec = v
			case recCreatedNanos:
				createdNsec = v
			case recDeleting:
				rec.Deleting = v != 0
			case recCreateRevision:
				rec.CreateRevision = v
			case recModRevision:
				rec.ModRevision = v
			}
		default:
			// A field of a later schema: skipped, as protobuf does.
			l := protowire.ConsumeFieldValue(n, typ, b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			b = b[l:]
		}
	}
	if createdSec != 0 || createdNsec != 0 {
		rec.CreatedAt = time.Unix(createdSec, createdNsec).UTC()
	}
	return nil
}

func unmarshalObject(b []byte, apiVersion, kind *string, obj apiObject) error {
	var raw []byte
	seen := false
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if typ != protowire.BytesType {
			l := protowire.ConsumeFieldValue(n, typ, b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			b = b[l:]
			continue
		}
		v, l := protowire.ConsumeBytes(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		switch n {
		case objAPIVersion:
			*apiVersion = string(v)
		case objKind:
			*kind = string(v)
		case objRaw:
			raw, seen = v, true
		}
	}
	if !seen {
		return errors.New("no object")
	}
	// The type's protobuf has no type meta: Unmarshal leaves it as set.
	return obj.Unmarshal(raw)
}
