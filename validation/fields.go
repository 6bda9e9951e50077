package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateGracePeriod validates a termination grace period in seconds, a
// pod's spec.terminationGracePeriodSeconds or one given with a deletion: 0
// to lim.MaxGracePeriodSeconds.
func ValidateGracePeriod(seconds int64, fldPath *field.Path, lim Limits) field.ErrorList {
	return gracePeriod(fldPath, seconds, 0, lim.withDefaults().MaxGracePeriodSeconds)
}

func gracePeriod(p *field.Path, seconds, minimum, maximum int64) field.ErrorList {
	switch {
	case seconds < minimum:
		return field.ErrorList{field.Invalid(p, seconds, fmt.Sprintf("must be greater than or equal to %d", minimum))}
	case seconds > maximum:
		// Kubernetes has no upper bound: say whose this one is.
		return field.ErrorList{field.Invalid(p, seconds, fmt.Sprintf("must be at most %d: this node's limit, not Kubernetes' "+
			"(podsyncd --max-grace-period-seconds raises it)", maximum))}
	}
	return nil
}

func invalid(p *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(p, value, msg))
	}
	return errs
}

// DNS1123Label checks that v is a DNS-1123 label (a namespace, a container
// name), as the API server does.
func DNS1123Label(p *field.Path, v string) field.ErrorList {
	return invalid(p, v, validation.IsDNS1123Label(v))
}

// DNS1123Subdomain checks that v is a DNS-1123 subdomain (an object's
// name), as the API server does.
func DNS1123Subdomain(p *field.Path, v string) field.ErrorList {
	return invalid(p, v, validation.IsDNS1123Subdomain(v))
}

func configMapKey(p *field.Path, k string) field.ErrorList {
	return invalid(p, k, validation.IsConfigMapKey(k))
}

func userID(p *field.Path, id *int64) field.ErrorList {
	if id == nil {
		return nil
	}
	return invalid(p, *id, validation.IsValidUserID(*id))
}

func groupID(p *field.Path, id *int64) field.ErrorList {
	if id == nil {
		return nil
	}
	return invalid(p, *id, validation.IsValidGroupID(*id))
}

// fileMode accepts modes 0 to 0777.
func fileMode(p *field.Path, mode int32) field.ErrorList {
	if mode < 0 || mode > 0o777 {
		return field.ErrorList{field.Invalid(p, mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

// notFound is field.NotFound with a detail.
func notFound(p *field.Path, value any, detail string) *field.Error {
	e := field.NotFound(p, value)
	e.Detail = detail
	return e
}

// tooLong is field.TooLong of a whole object at p; at the root (p nil) its
// field is empty, not "<nil>".
func tooLong(p *field.Path, maxLength int) *field.Error {
	e := field.TooLong(p, nil, maxLength)
	if p == nil {
		e.Field = ""
	}
	return e
}

// notInRequest is the detail of a reference to an object that is not among
// the Options' Objects.
func notInRequest(kind, namespace string) string {
	return fmt.Sprintf("no %s of this name in namespace %q in the request; set optional to run without it", kind, namespace)
}
