package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// unsupportedFields reports every field set in orig that did not survive
// the trip through the API, i.e. every core/v1 field podsync does not
// support. Both objects are compared in their JSON form, so paths use
// Kubernetes' field names ("spec.containers[0].lifecycle.postStart.httpGet")
// and new core/v1 fields are caught without a list to maintain.
func unsupportedFields(orig, roundTripped any) field.ErrorList {
	if sameEncoding(orig, roundTripped) {
		return nil
	}
	return unsupportedJSON(orig, roundTripped)
}

// unsupportedJSON is unsupportedFields by the objects' JSON forms alone.
func unsupportedJSON(orig, roundTripped any) field.ErrorList {
	rawA, errA := json.Marshal(orig)
	rawB, errB := json.Marshal(roundTripped)
	if err := errors.Join(errA, errB); err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	// Nearly every document survives whole, and equal JSON has no field
	// to report: only one that lost some is decoded to find which (the
	// decoding is most of the cost, which podsync-vk pays for every pod
	// and object it applies).
	if bytes.Equal(rawA, rawB) {
		return nil
	}
	var a, b any
	if err := errors.Join(json.Unmarshal(rawA, &a), json.Unmarshal(rawB, &b)); err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	var errs field.ErrorList
	diffJSON(nil, a, b, &errs)
	return errs
}

func diffJSON(path *field.Path, orig, back any, errs *field.ErrorList) {
	switch o := orig.(type) {
	case map[string]any:
		b, _ := back.(map[string]any)
		keys := make([]string, 0, len(o))
		for k := range o {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if isEmptyJSON(o[k]) {
				continue
			}
			child := childPath(path, k)
			// An object that survived, even empty, is compared field by
			// field; a field that did not survive is reported whole.
			bv, ok := b[k]
			if !ok || bv == nil {
				*errs = append(*errs, unsupported(child, o[k]))
				continue
			}
			diffJSON(child, o[k], bv, errs)
		}
	case []any:
		b, _ := back.([]any)
		for i, v := range o {
			if i >= len(b) {
				*errs = append(*errs, unsupported(path.Index(i), v))
				continue
			}
			diffJSON(path.Index(i), v, b[i], errs)
		}
	default:
		if !reflect.DeepEqual(orig, back) {
			*errs = append(*errs, unsupported(path, orig))
		}
	}
}

func childPath(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}

func isEmptyJSON(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// wireObject is a core/v1 object with its generated protobuf encoding
// (generated.pb.go), which covers every serialized field but the type
// meta (the API server's protobuf envelope carries that).
type wireObject interface {
	Marshal() ([]byte, error)
	GetObjectKind() schema.ObjectKind
}

// sameEncoding reports whether a and b are core/v1 objects with the same
// type meta and the same protobuf encoding: then their JSON forms are
// equal too (the encoding keeps every field JSON does, timestamps to the
// nanosecond, map keys sorted), and no field was lost. It is several times
// cheaper than the two JSON encodings, which remain for objects it cannot
// vouch for. False is no verdict.
func sameEncoding(a, b any) bool {
	wa, ok1 := a.(wireObject)
	wb, ok2 := b.(wireObject)
	if !ok1 || !ok2 {
		return false
	}
	ta, ok1 := wa.GetObjectKind().(*metav1.TypeMeta)
	tb, ok2 := wb.GetObjectKind().(*metav1.TypeMeta)
	if !ok1 || !ok2 || *ta != *tb {
		return false
	}
	ra, errA := wa.Marshal()
	rb, errB := wb.Marshal()
	return errA == nil && errB == nil && bytes.Equal(ra, rb)
}
