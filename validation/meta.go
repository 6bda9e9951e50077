package validation

import (
	"strings"

	"github.com/google/uuid"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateUID validates a pod UID, such as metadata.uid or the uid a
// deletion names: a UUID in its canonical 36-character form.
func ValidateUID(uid string, fldPath *field.Path) field.ErrorList {
	if _, err := uuid.Parse(uid); err != nil || len(uid) != 36 {
		return field.ErrorList{field.Invalid(fldPath, uid, "must be a UUID such as 0f8fad5b-d9cb-469f-a165-70867728950e")}
	}
	return nil
}

func validateTypeMeta(p *field.Path, tm metav1.TypeMeta, kind string) field.ErrorList {
	var errs field.ErrorList
	if tm.APIVersion != "" && tm.APIVersion != "v1" {
		errs = append(errs, field.NotSupported(p.Child("apiVersion"), tm.APIVersion, []string{"", "v1"}))
	}
	if tm.Kind != "" && tm.Kind != kind {
		errs = append(errs, field.NotSupported(p.Child("kind"), tm.Kind, []string{"", kind}))
	}
	return errs
}

// validateObjectMeta validates a defaulted object's name, namespace, labels
// and annotations.
func validateObjectMeta(p *field.Path, m *metav1.ObjectMeta) field.ErrorList {
	var errs field.ErrorList
	if m.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, DNS1123Subdomain(p.Child("name"), m.Name)...)
	}
	errs = append(errs, DNS1123Label(p.Child("namespace"), m.Namespace)...)
	errs = append(errs, metav1validation.ValidateLabels(m.Labels, p.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(m.Annotations, p.Child("annotations"))...)
	return errs
}

// defaultedMeta returns m with the namespace the API server's defaulting
// gives an object that names none (convert.DefaultConfigMap,
// convert.DefaultSecret), for validating an object before or after it is
// defaulted alike.
func defaultedMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	if m.Namespace == "" {
		m.Namespace = metav1.NamespaceDefault
	}
	return m
}

// ValidateGenerateName validates a pod's generateName as the API server
// validates it (NameIsDNSSubdomain with prefix): the prefix, with a
// trailing "-" taken as a letter, is a DNS-1123 subdomain, and at most
// MaxGenerateNameLength characters of it are used.
func ValidateGenerateName(p *field.Path, prefix string) field.ErrorList {
	masked := prefix
	if len(masked) > 1 && strings.HasSuffix(masked, "-") {
		masked = masked[:len(masked)-1] + "a"
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(masked) {
		errs = append(errs, field.Invalid(p, prefix, msg))
	}
	return errs
}

// The API server's names.SimpleNameGenerator: a generated name is its
// prefix, cut to MaxGenerateNameLength, and GeneratedSuffixLength random
// characters.
const (
	GeneratedSuffixLength = 5
	MaxGenerateNameLength = 63 - GeneratedSuffixLength
)
