package server

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine"
)

// objectKindFromProto returns the store's kind of k; "" (both) for
// unspecified.
func objectKindFromProto(k podsyncv1.ObjectKind) engine.ObjectKind {
	switch k {
	case podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP:
		return engine.KindConfigMap
	case podsyncv1.ObjectKind_OBJECT_KIND_SECRET:
		return engine.KindSecret
	}
	return ""
}

func objectKindToProto(k engine.ObjectKind) podsyncv1.ObjectKind {
	switch k {
	case engine.KindConfigMap:
		return podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP
	case engine.KindSecret:
		return podsyncv1.ObjectKind_OBJECT_KIND_SECRET
	}
	return podsyncv1.ObjectKind_OBJECT_KIND_UNSPECIFIED
}

func objectRefToProto(r engine.ObjectRef, resourceVersion string) *podsyncv1.ObjectRef {
	return &podsyncv1.ObjectRef{Kind: objectKindToProto(r.Kind), Namespace: r.Namespace, Name: r.Name, ResourceVersion: resourceVersion}
}

// objectToProto translates a stored object, whose Secret's values the
// store removed.
func objectToProto(rec *engine.ObjectRecord) (*podsyncv1.Object, error) {
	return storedToProto(rec.ConfigMap, rec.Secret)
}

// storedToProto translates a stored ConfigMap or Secret (values removed).
func storedToProto(cm *corev1.ConfigMap, sec *corev1.Secret) (*podsyncv1.Object, error) {
	if sec != nil {
		out, err := convert.SecretToProto(sec)
		if err != nil {
			return nil, err
		}
		return &podsyncv1.Object{Object: &podsyncv1.Object_Secret{Secret: out}}, nil
	}
	out, err := convert.ConfigMapToProto(cm)
	if err != nil {
		return nil, err
	}
	return &podsyncv1.Object{Object: &podsyncv1.Object_ConfigMap{ConfigMap: out}}, nil
}

// objectEntryToProto translates an object entry of the revision log.
func objectEntryToProto(e engine.Entry) (*podsyncv1.WatchObjectsResponse, error) {
	out := &podsyncv1.WatchObjectsResponse{Revision: e.Revision}
	switch e.Kind {
	case engine.EntryObjectApplied:
		out.Object = objectRefToProto(*e.Object, strconv.FormatInt(e.Revision, 10))
		obj, err := storedToProto(e.ConfigMap, e.Secret)
		if err != nil {
			return nil, err
		}
		out.Change = &podsyncv1.WatchObjectsResponse_Applied{Applied: obj}
	case engine.EntryObjectDeleted:
		out.Object = objectRefToProto(*e.Object, "")
		out.Change = &podsyncv1.WatchObjectsResponse_Deleted{Deleted: &podsyncv1.ObjectDeleted{Time: timeToProto(e.Time)}}
	}
	return out, nil
}
