package server

import (
	"strconv"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/validation"
)

// sourceAnnotation refuses the annotation podsyncd sets on the pods and
// objects of its manifest directory: a request cannot claim to be a file.
func sourceAnnotation(p *field.Path, annotations map[string]string) field.ErrorList {
	if _, ok := annotations[engine.SourceAnnotation]; !ok {
		return nil
	}
	return field.ErrorList{field.Forbidden(p.Child("metadata", "annotations").Key(engine.SourceAnnotation),
		"podsyncd sets it on the pods and objects of its manifest directory; remove it")}
}

// ObjectsFromRequest converts, defaults and validates the ConfigMaps and
// Secrets of an ApplyObjects request (as PodsFromRequest those of a
// request with pods): at least one object, unique by namespace/name, each
// resource_version empty or a number. It returns a *ValidationError
// listing every violation.
func (v *Validator) ObjectsFromRequest(req *podsyncv1.ApplyObjectsRequest) ([]*corev1.ConfigMap, []*corev1.Secret, error) {
	lim := v.limits()
	var errs field.ErrorList
	if n := proto.Size(req); n > lim.MaxRequestBytes {
		tooLong := field.TooLong(nil, nil, lim.MaxRequestBytes)
		tooLong.Field = ""
		errs = append(errs, tooLong)
	}
	if len(req.GetConfigMaps())+len(req.GetSecrets()) == 0 {
		errs = append(errs, field.Required(field.NewPath("configMaps"), "at least one ConfigMap or Secret is required"))
	}
	opts := validation.Options{Limits: lim.validationLimits(), NodeName: v.nodeName(), StoredObjects: true}
	cms, cmErrs := configMapsFromProto(field.NewPath("configMaps"), req.GetConfigMaps(), opts)
	secrets, secErrs := secretsFromProto(field.NewPath("secrets"), req.GetSecrets(), opts)
	errs = append(errs, cmErrs...)
	errs = append(errs, secErrs...)
	for i, cm := range cms {
		errs = append(errs, resourceVersion(field.NewPath("configMaps").Index(i).Child("metadata", "resourceVersion"), cm.ResourceVersion)...)
	}
	for i, s := range secrets {
		errs = append(errs, resourceVersion(field.NewPath("secrets").Index(i).Child("metadata", "resourceVersion"), s.ResourceVersion)...)
	}
	if len(errs) > 0 {
		return nil, nil, InvalidRequest(errs)
	}
	return cms, secrets, nil
}

// resourceVersion validates a resource_version precondition: empty or a
// revision.
func resourceVersion(p *field.Path, rv string) field.ErrorList {
	if rv == "" {
		return nil
	}
	if n, err := strconv.ParseInt(rv, 10, 64); err != nil || n < 0 {
		return field.ErrorList{field.Invalid(p, rv, "must be empty or a resourceVersion podsyncd returned (a number)")}
	}
	return nil
}

// validateObjectKind validates a kind: one of objectKinds, or unspecified
// when optional.
func validateObjectKind(p *field.Path, k podsyncv1.ObjectKind, optional bool) field.ErrorList {
	switch k {
	case podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP, podsyncv1.ObjectKind_OBJECT_KIND_SECRET:
		return nil
	case podsyncv1.ObjectKind_OBJECT_KIND_UNSPECIFIED:
		if optional {
			return nil
		}
		return field.ErrorList{field.Required(p, "")}
	}
	return field.ErrorList{field.NotSupported(p, k.String(), objectKinds)}
}

// ValidateGetObjectRequest validates a GetObjectRequest: a kind, and a
// name and namespace as for GetPod.
func (v *Validator) ValidateGetObjectRequest(req *podsyncv1.GetObjectRequest) field.ErrorList {
	errs := validateObjectKind(field.NewPath("kind"), req.GetKind(), false)
	return append(errs, validatePodName(nil, req.GetNamespace(), req.GetName())...)
}

// ValidateListObjectsRequest validates a ListObjectsRequest: kind known
// or unspecified, namespace and label_selector as for ListPods.
func (v *Validator) ValidateListObjectsRequest(req *podsyncv1.ListObjectsRequest) field.ErrorList {
	errs := validateObjectKind(field.NewPath("kind"), req.GetKind(), true)
	errs = append(errs, validateOptionalNamespace(field.NewPath("namespace"), req.GetNamespace())...)
	return append(errs, validateSelector(field.NewPath("labelSelector"), req.GetLabelSelector(), v.limits().MaxLabelSelectorBytes)...)
}

// ValidateDeleteObjectRequest validates a DeleteObjectRequest as a
// GetObjectRequest, with resource_version empty or a number.
func (v *Validator) ValidateDeleteObjectRequest(req *podsyncv1.DeleteObjectRequest) field.ErrorList {
	errs := validateObjectKind(field.NewPath("kind"), req.GetKind(), false)
	errs = append(errs, validatePodName(nil, req.GetNamespace(), req.GetName())...)
	return append(errs, resourceVersion(field.NewPath("resourceVersion"), req.GetResourceVersion())...)
}

// ValidateWatchObjectsRequest validates a WatchObjectsRequest:
// since_revision not negative, kind known or unspecified, namespace empty
// or a DNS-1123 label.
func (v *Validator) ValidateWatchObjectsRequest(req *podsyncv1.WatchObjectsRequest) field.ErrorList {
	var errs field.ErrorList
	if r := req.GetSinceRevision(); r < 0 {
		errs = append(errs, field.Invalid(field.NewPath("sinceRevision"), r, "must be greater than or equal to 0"))
	}
	errs = append(errs, validateObjectKind(field.NewPath("kind"), req.GetKind(), true)...)
	return append(errs, validateOptionalNamespace(field.NewPath("namespace"), req.GetNamespace())...)
}
