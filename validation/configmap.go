package validation

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateConfigMap validates a ConfigMap sent with pods: apiVersion and
// kind (empty, or v1 and ConfigMap), name, namespace, labels and
// annotations, keys of data and binaryData (ConfigMap keys, none in both),
// and its size, keys and values together, against
// opts.Limits.MaxConfigMapBytes. cm may be defaulted
// (convert.DefaultConfigMap) or not: an empty namespace is taken as the
// default one. It is not changed. Paths are below fldPath, as in
// ValidatePod; a ConfigMap too large is reported at fldPath itself.
func ValidateConfigMap(cm *corev1.ConfigMap, fldPath *field.Path, opts Options) field.ErrorList {
	maxBytes := opts.Limits.withDefaults().MaxConfigMapBytes
	errs := validateTypeMeta(fldPath, cm.TypeMeta, "ConfigMap")
	meta := defaultedMeta(cm.ObjectMeta)
	errs = append(errs, validateObjectMeta(fldPath.Child("metadata"), &meta)...)
	size := 0
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		errs = append(errs, configMapKey(fldPath.Child("data").Key(k), k)...)
		size += len(k) + len(cm.Data[k])
	}
	for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		kp := fldPath.Child("binaryData").Key(k)
		errs = append(errs, configMapKey(kp, k)...)
		if _, dup := cm.Data[k]; dup {
			errs = append(errs, field.Duplicate(kp, k))
		}
		size += len(k) + len(cm.BinaryData[k])
	}
	if size > maxBytes {
		errs = append(errs, tooLong(fldPath, maxBytes))
	}
	return errs
}

// ValidateSecret validates a Secret sent with pods: the keys of data and
// stringData (ConfigMap keys), apiVersion and kind (empty, or v1 and
// Secret), name, namespace, labels and annotations, type (a qualified name;
// empty is Opaque) and its size, keys and values together once stringData
// is folded into data, against opts.Limits.MaxSecretBytes.
//
// s may be defaulted (convert.DefaultSecret) or not; it is not changed.
// Validate it before defaulting folds stringData into data, so that a bad
// key is named in the field it was sent in. Paths are below fldPath, as in
// ValidatePod; a Secret too large is reported at fldPath itself.
func ValidateSecret(s *corev1.Secret, fldPath *field.Path, opts Options) field.ErrorList {
	maxBytes := opts.Limits.withDefaults().MaxSecretBytes
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(s.Data)) {
		errs = append(errs, configMapKey(fldPath.Child("data").Key(k), k)...)
	}
	for _, k := range slices.Sorted(maps.Keys(s.StringData)) {
		errs = append(errs, configMapKey(fldPath.Child("stringData").Key(k), k)...)
	}
	errs = append(errs, validateTypeMeta(fldPath, s.TypeMeta, "Secret")...)
	meta := defaultedMeta(s.ObjectMeta)
	errs = append(errs, validateObjectMeta(fldPath.Child("metadata"), &meta)...)
	// An empty type is Opaque once defaulted, a qualified name.
	if t := string(s.Type); t != "" && len(validation.IsQualifiedName(t)) > 0 {
		errs = append(errs, field.Invalid(fldPath.Child("type"), t, "must be a qualified name, such as Opaque"))
	}
	// The size once defaulting has folded stringData into data, its values
	// replacing those of data with the same key.
	size := 0
	for k, v := range s.Data {
		if _, replaced := s.StringData[k]; !replaced {
			size += len(k) + len(v)
		}
	}
	for k, v := range s.StringData {
		size += len(k) + len(v)
	}
	if size > maxBytes {
		errs = append(errs, tooLong(fldPath, maxBytes))
	}
	return errs
}
