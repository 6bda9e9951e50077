package convert

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsync/podsync/validation"
)

// objectError is one problem of ValidateManifests.
type objectError struct {
	kind, name string
	index      int
	err        *field.Error
	cause      error
}

// ValidateManifests checks defaulted manifests as podsyncd checks the
// objects of a request (server.Validator): each object converts to the
// API without losing a field, each pod is valid (validation.ValidatePod's
// metadata and spec checks, after the round trip through the API that
// podsyncd sees), pods are unique by namespace/name and uid, ConfigMaps
// and Secrets by namespace/name, and every ConfigMap and Secret a pod
// needs is among them. opts.Objects is ignored. Secrets are checked as
// given (before DefaultSecret). It returns a *ManifestsError, whose
// findings have no file or line, or nil.
func ValidateManifests(m *Manifests, opts validation.Options) error {
	errs := validateManifests(m, opts)
	if len(errs) == 0 {
		return nil
	}
	me := &ManifestsError{}
	for _, e := range errs {
		me.Problems = append(me.Problems, Finding{Kind: e.kind, Name: e.name, Field: e.err.Field, Message: Describe(e.err)})
		if e.cause != nil {
			me.causes = append(me.causes, e.cause)
		}
	}
	return me
}

func validateManifests(m *Manifests, opts validation.Options) []objectError {
	// References are checked against the defaulted objects, as podsyncd
	// checks them.
	cms := make([]*corev1.ConfigMap, len(m.ConfigMaps))
	for i, cm := range m.ConfigMaps {
		cms[i] = cm.DeepCopy()
		DefaultConfigMap(cms[i])
	}
	secrets := make([]*corev1.Secret, len(m.Secrets))
	for i, s := range m.Secrets {
		secrets[i] = s.DeepCopy()
		DefaultSecret(secrets[i])
	}
	opts.Objects = validation.NewObjects(cms, secrets)
	var out []objectError
	add := func(kind, name string, i int, cause error, errs ...*field.Error) {
		for _, fe := range errs {
			out = append(out, objectError{kind: kind, name: name, index: i, err: fe, cause: cause})
			cause = nil // once per object
		}
	}
	seenCM := make(map[types.NamespacedName]bool)
	for i, cm := range m.ConfigMaps {
		if _, err := ConfigMapToProto(cm); err != nil {
			add(manifestKindConfigMap, cm.Name, i, err, invalidFields(err)...)
			continue
		}
		d := cm.DeepCopy()
		DefaultConfigMap(d)
		add(manifestKindConfigMap, cm.Name, i, nil, validation.ValidateConfigMap(d, nil, opts)...)
		key := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
		if seenCM[key] {
			add(manifestKindConfigMap, cm.Name, i, nil, field.Duplicate(field.NewPath("metadata", "name"), key.String()))
		}
		seenCM[key] = true
	}
	seenSecret := make(map[types.NamespacedName]bool)
	for i, s := range m.Secrets {
		if _, err := SecretToProto(s); err != nil {
			add(manifestKindSecret, s.Name, i, err, invalidFields(err)...)
			continue
		}
		add(manifestKindSecret, s.Name, i, nil, validation.ValidateSecret(s, nil, opts)...)
		ns := s.Namespace
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		key := types.NamespacedName{Namespace: ns, Name: s.Name}
		if seenSecret[key] {
			add(manifestKindSecret, s.Name, i, nil, field.Duplicate(field.NewPath("metadata", "name"), key.String()))
		}
		seenSecret[key] = true
	}
	byName := make(map[types.NamespacedName]bool)
	byUID := make(map[types.UID]bool)
	for i, pod := range m.Pods {
		pb, err := PodToProto(pod)
		if err != nil {
			refused := invalidFields(err)
			add(manifestKindPod, pod.Name, i, err, refused...)
			// The rest of the pod is checked as it is, so that its
			// problems come in the same round as the refused fields.
			d := pod.DeepCopy()
			d.Status = corev1.PodStatus{}
			d.CreationTimestamp = metav1.Time{}
			rest := append(validation.ValidatePodMetadata(d, nil), validation.ValidatePodSpec(&d.Spec, &d.ObjectMeta, field.NewPath("spec"), opts)...)
			add(manifestKindPod, pod.Name, i, nil, notUnder(rest, refused)...)
			continue
		}
		// What podsyncd validates is the pod it converts back.
		back, err := PodFromProto(pb)
		if err != nil {
			add(manifestKindPod, pod.Name, i, err, invalidFields(err)...)
			continue
		}
		back.Status = corev1.PodStatus{}
		back.CreationTimestamp = metav1.Time{}
		Default(back)
		add(manifestKindPod, pod.Name, i, nil, validation.ValidatePodMetadata(back, nil)...)
		add(manifestKindPod, pod.Name, i, nil, validation.ValidatePodSpec(&back.Spec, &back.ObjectMeta, field.NewPath("spec"), opts)...)
		if back.Name == "" {
			continue // named by podsyncd (generateName): unique by then
		}
		key := types.NamespacedName{Namespace: back.Namespace, Name: back.Name}
		if byName[key] {
			add(manifestKindPod, pod.Name, i, nil, field.Duplicate(field.NewPath("metadata", "name"), key.String()))
		} else if byUID[back.UID] {
			add(manifestKindPod, pod.Name, i, nil, field.Duplicate(field.NewPath("metadata", "uid"), string(back.UID)))
		}
		byName[key], byUID[back.UID] = true, true
	}
	return out
}

// notUnder returns the errors of errs that are not at or under the field
// of one of refused.
func notUnder(errs, refused field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		under := false
		for _, r := range refused {
			// A refused generateName says to give metadata.name.
			if r.Field == "metadata.generateName" && e.Field == "metadata.name" && e.Type == field.ErrorTypeRequired {
				under = true
				break
			}
			if e.Field == r.Field || strings.HasPrefix(e.Field, r.Field+".") || strings.HasPrefix(e.Field, r.Field+"[") {
				under = true
				break
			}
		}
		if !under {
			out = append(out, e)
		}
	}
	return out
}

// invalidFields returns the field errors of an *InvalidError, or err as
// an internal error.
func invalidFields(err error) field.ErrorList {
	var ie *InvalidError
	if errors.As(err, &ie) {
		return ie.Errors
	}
	return field.ErrorList{field.InternalError(nil, err)}
}

// Describe says what is wrong with a field in the words of a manifest's
// author: field.Error's text without its path and without the API
// server's type names ("Forbidden", "Unsupported value").
func Describe(fe *field.Error) string {
	switch fe.Type {
	case field.ErrorTypeForbidden:
		return fe.Detail
	case field.ErrorTypeRequired:
		if fe.Detail == "" {
			return "required"
		}
		return "required: " + fe.Detail
	case field.ErrorTypeNotSupported:
		return fmt.Sprintf("%s is not one of the values podsync knows: %s", badValue(fe.BadValue), strings.TrimPrefix(fe.Detail, "supported values: "))
	case field.ErrorTypeDuplicate:
		return fmt.Sprintf("%s is given twice", badValue(fe.BadValue))
	case field.ErrorTypeInvalid:
		return fmt.Sprintf("%s is not valid: %s", badValue(fe.BadValue), fe.Detail)
	case field.ErrorTypeTooLong, field.ErrorTypeTooMany:
		return fe.Detail
	}
	return strings.TrimPrefix(fe.ErrorBody(), fe.Type.String()+": ")
}

func badValue(v any) string {
	switch t := v.(type) {
	case string:
		return strconv.Quote(t)
	case *string:
		if t != nil {
			return strconv.Quote(*t)
		}
	}
	// A named string type (corev1.RestartPolicy) is quoted as a string.
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
		return strconv.Quote(rv.String())
	}
	return fmt.Sprintf("%v", v)
}

// kindWord names a Go type as a manifest's author knows it.
func kindWord(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "a list"
	case reflect.Map:
		return "a map"
	case reflect.Struct, reflect.Pointer:
		return "an object"
	}
	return "another type"
}
