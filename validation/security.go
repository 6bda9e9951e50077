package validation

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The security profile checks mirror k8s.io/kubernetes
// pkg/apis/core/validation: validateSeccompProfileField,
// ValidateAppArmorProfileField, ValidateProcMountType,
// ValidateSeccompPodAnnotations, ValidateAppArmorPodAnnotations and the
// create-time checks that annotations and fields agree
// (validateSeccompAnnotationsAndFields,
// validateAppArmorAnnotationsAndFieldsMatchOnCreate).
//
// NOTE(secctx): the API server accepts a legacy annotation it then ignores
// (a seccomp annotation since v1.27, one naming a missing container, an
// empty or unparsable AppArmor value); podsync refuses those instead, so
// that no profile a pod asks for is silently dropped. The ones it can
// read, convert.Default turns into fields as the API server's
// applyAppArmorVersionSkew does.

var (
	seccompProfileTypes  = []corev1.SeccompProfileType{corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined}
	appArmorProfileTypes = []corev1.AppArmorProfileType{corev1.AppArmorProfileTypeLocalhost, corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined}
	procMountTypes       = []corev1.ProcMountType{corev1.DefaultProcMount, corev1.UnmaskedProcMount}
)

// maxAppArmorProfileBytes is the API server's bound on a localhost AppArmor
// profile name (PATH_MAX - 1).
const maxAppArmorProfileBytes = 4095

// seccompProfile is validateSeccompProfileField. A localhost profile is a
// path below podsyncd's seccomp profile directory: relative, no "..", and
// not empty (the kubelet fails such a container; podsync refuses it first).
func seccompProfile(p *field.Path, sp *corev1.SeccompProfile) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	switch sp.Type {
	case corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
	case "":
		errs = append(errs, field.Required(p.Child("type"), "type is required when seccompProfile is set"))
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), sp.Type, seccompProfileTypes))
	}
	lp := p.Child("localhostProfile")
	switch {
	case sp.Type == corev1.SeccompProfileTypeLocalhost && sp.LocalhostProfile == nil:
		errs = append(errs, field.Required(lp, "must be set when seccomp type is Localhost"))
	case sp.Type == corev1.SeccompProfileTypeLocalhost:
		errs = append(errs, relativePath(lp, *sp.LocalhostProfile, true)...)
	case sp.LocalhostProfile != nil:
		errs = append(errs, field.Invalid(lp, *sp.LocalhostProfile, "can only be set when seccomp type is Localhost"))
	}
	return errs
}

// appArmorProfile is ValidateAppArmorProfileField.
func appArmorProfile(p *field.Path, ap *corev1.AppArmorProfile) field.ErrorList {
	if ap == nil {
		return nil
	}
	var errs field.ErrorList
	lp := p.Child("localhostProfile")
	switch ap.Type {
	case corev1.AppArmorProfileTypeLocalhost:
		switch {
		case ap.LocalhostProfile == nil:
			errs = append(errs, field.Required(lp, "must be set when AppArmor type is Localhost"))
		case strings.TrimSpace(*ap.LocalhostProfile) != *ap.LocalhostProfile:
			errs = append(errs, field.Invalid(lp, *ap.LocalhostProfile, "must not be padded with whitespace"))
		case *ap.LocalhostProfile == "":
			errs = append(errs, field.Required(lp, "must be set when AppArmor type is Localhost"))
		}
		if ap.LocalhostProfile != nil && len(*ap.LocalhostProfile) > maxAppArmorProfileBytes {
			errs = append(errs, field.TooLong(lp, nil, maxAppArmorProfileBytes))
		}
	case corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined:
		if ap.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(lp, *ap.LocalhostProfile, "can only be set when AppArmor type is Localhost"))
		}
	case "":
		errs = append(errs, field.Required(p.Child("type"), "type is required when appArmorProfile is set"))
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), ap.Type, appArmorProfileTypes))
	}
	return errs
}

// ValidateAppArmorProfile is the API server's ValidateAppArmorProfileField:
// the violations of an appArmorProfile at fldPath, or nil.
func ValidateAppArmorProfile(ap *corev1.AppArmorProfile, fldPath *field.Path) field.ErrorList {
	return appArmorProfile(fldPath, ap)
}

// procMount is ValidateProcMountType plus ValidateSecurityContext's rule
// that Unmasked needs a user namespace (hostUsers: false). podsync runs
// every pod in the host's user namespace, so Unmasked is always refused.
func procMount(p *field.Path, pm *corev1.ProcMountType) field.ErrorList {
	switch {
	case pm == nil:
		return nil
	case !slices.Contains(procMountTypes, *pm):
		return field.ErrorList{field.NotSupported(p, *pm, procMountTypes)}
	case *pm == corev1.UnmaskedProcMount:
		return field.ErrorList{field.Invalid(p, *pm, "`hostUsers` must be false to use `Unmasked`; podsync runs pods in the host's user namespace")}
	}
	return nil
}

// SeccompProfileForAnnotation returns the seccompProfile field a legacy
// seccomp annotation value stands for (the API server's
// SeccompFieldForAnnotation of v1.19 to v1.26: "runtime/default" and
// "docker/default", "unconfined", "localhost/<path>"), or nil for a value
// that names no profile.
func SeccompProfileForAnnotation(v string) *corev1.SeccompProfile {
	switch {
	case v == corev1.SeccompProfileNameUnconfined:
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	case v == corev1.SeccompProfileRuntimeDefault || v == corev1.DeprecatedSeccompProfileDockerDefault:
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	case strings.HasPrefix(v, corev1.SeccompLocalhostProfileNamePrefix):
		if name := strings.TrimPrefix(v, corev1.SeccompLocalhostProfileNamePrefix); name != "" {
			return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	return nil
}

// AppArmorProfileForAnnotation returns the appArmorProfile field a legacy
// AppArmor annotation value stands for (the API server's
// ApparmorFieldForAnnotation: "runtime/default", "unconfined",
// "localhost/<name>"), or nil for a value that names no profile.
func AppArmorProfileForAnnotation(v string) *corev1.AppArmorProfile {
	switch {
	case v == corev1.DeprecatedAppArmorBetaProfileNameUnconfined:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	case v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
	case strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix):
		if name := strings.TrimPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix); name != "" {
			return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	return nil
}

// legacyProfileAnnotations validates the legacy seccomp and AppArmor
// annotations of a defaulted pod, at paths below fldPath: each must name a
// valid profile and a container of the pod, and agree with the field that
// applies to that container. After convert.Default every annotation it
// could read has a field, so a disagreement means the pod set both.
func legacyProfileAnnotations(pod *corev1.Pod, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	ann := fldPath.Child("metadata", "annotations")
	spec := fldPath.Child("spec")
	var podSeccomp *corev1.SeccompProfile
	var podAppArmor *corev1.AppArmorProfile
	if sc := pod.Spec.SecurityContext; sc != nil {
		podSeccomp, podAppArmor = sc.SeccompProfile, sc.AppArmorProfile
	}
	if v, ok := pod.Annotations[corev1.SeccompPodAnnotationKey]; ok {
		errs = append(errs, seccompAnnotation(ann.Key(corev1.SeccompPodAnnotationKey), v, podSeccomp, spec.Child("securityContext", "seccompProfile"))...)
	}
	containerPaths := map[string]*field.Path{}
	containers := map[string]*corev1.Container{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		containers[c.Name], containerPaths[c.Name] = c, spec.Child("initContainers").Index(i)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		containers[c.Name], containerPaths[c.Name] = c, spec.Child("containers").Index(i)
	}
	keys := make([]string, 0, len(pod.Annotations))
	for k := range pod.Annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := pod.Annotations[k]
		var prefix string
		switch {
		case strings.HasPrefix(k, corev1.SeccompContainerAnnotationKeyPrefix):
			prefix = corev1.SeccompContainerAnnotationKeyPrefix
		case strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix):
			prefix = corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix
		default:
			continue
		}
		name := strings.TrimPrefix(k, prefix)
		c, found := containers[name]
		if !found {
			errs = append(errs, field.Invalid(ann.Key(k), name, "container not found"))
			continue
		}
		sc := c.SecurityContext
		if prefix == corev1.SeccompContainerAnnotationKeyPrefix {
			var f *corev1.SeccompProfile
			if sc != nil {
				f = sc.SeccompProfile
			}
			errs = append(errs, seccompAnnotation(ann.Key(k), v, f, containerPaths[name].Child("securityContext", "seccompProfile"))...)
			continue
		}
		f := podAppArmor
		if sc != nil && sc.AppArmorProfile != nil {
			f = sc.AppArmorProfile
		}
		errs = append(errs, appArmorAnnotation(ann.Key(k), v, f, containerPaths[name].Child("securityContext", "appArmorProfile"))...)
	}
	return errs
}

// seccompAnnotation is ValidateSeccompProfile for one annotation at p, and
// validateSeccompAnnotationsAndFieldsMatch against f at fp.
func seccompAnnotation(p *field.Path, v string, f *corev1.SeccompProfile, fp *field.Path) field.ErrorList {
	want := SeccompProfileForAnnotation(v)
	if want == nil {
		return field.ErrorList{field.Invalid(p, v, `must be a valid seccomp profile: "runtime/default", "unconfined" or "localhost/<path>"; better, use the seccompProfile field`)}
	}
	if errs := seccompProfile(p, want); len(errs) > 0 {
		for _, e := range errs {
			e.Field, e.BadValue = p.String(), v
		}
		return errs
	}
	switch {
	case f == nil:
		// Only a pod that skipped convert.Default gets here.
		return field.ErrorList{field.Invalid(p, v, `is not converted to the seccompProfile field: default the pod first, or use the field`)}
	case f.Type != want.Type:
		return field.ErrorList{field.Forbidden(fp.Child("type"), "seccomp type in annotation and field must match")}
	case f.Type == corev1.SeccompProfileTypeLocalhost && (f.LocalhostProfile == nil || *f.LocalhostProfile != *want.LocalhostProfile):
		return field.ErrorList{field.Forbidden(fp.Child("localhostProfile"), "seccomp profile in annotation and field must match")}
	}
	return nil
}

// appArmorAnnotation is ValidateAppArmorProfileFormat for one annotation at
// p, and validateAppArmorAnnotationsAndFieldsMatchOnCreate against the
// profile f that applies to the container, at fp.
func appArmorAnnotation(p *field.Path, v string, f *corev1.AppArmorProfile, fp *field.Path) field.ErrorList {
	want := AppArmorProfileForAnnotation(v)
	if want == nil {
		return field.ErrorList{field.Invalid(p, v, `must be a valid AppArmor profile: "runtime/default", "unconfined" or "localhost/<name>"; better, use the appArmorProfile field`)}
	}
	if errs := appArmorProfile(p, want); len(errs) > 0 {
		for _, e := range errs {
			e.Field, e.BadValue = p.String(), v
		}
		return errs
	}
	switch {
	case f == nil:
		return field.ErrorList{field.Invalid(p, v, `is not converted to the appArmorProfile field: default the pod first, or use the field`)}
	case f.Type != want.Type:
		return field.ErrorList{field.Forbidden(fp.Child("type"), "apparmor type in annotation and field must match")}
	case f.Type == corev1.AppArmorProfileTypeLocalhost && (f.LocalhostProfile == nil || *f.LocalhostProfile != *want.LocalhostProfile):
		return field.ErrorList{field.Forbidden(fp.Child("localhostProfile"), "apparmor profile in annotation and field must match")}
	}
	return nil
}
