package validation

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AnnotationBackoffLimit is the number of failed container runs a pod
// allows before it fails as a whole: the Job controller's backoffLimit
// for a Job of one pod. convert sets it from a Job's spec.backoffLimit; a
// Pod may carry it too.
const AnnotationBackoffLimit = "podsync.io/backoff-limit"

// BackoffLimit is the pod's backoff limit, if it has a valid one.
func BackoffLimit(pod *corev1.Pod) (int32, bool) {
	v, ok := pod.Annotations[AnnotationBackoffLimit]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

// backoffLimitAnnotation checks the pod's backoff limit: a non-negative
// number, on a pod whose restarts all follow failures (restartPolicy
// OnFailure or Never).
func backoffLimitAnnotation(pod *corev1.Pod, fldPath *field.Path) field.ErrorList {
	v, ok := pod.Annotations[AnnotationBackoffLimit]
	if !ok {
		return nil
	}
	p := fldPath.Child("metadata", "annotations").Key(AnnotationBackoffLimit)
	if _, valid := BackoffLimit(pod); !valid {
		return field.ErrorList{field.Invalid(p, v, "must be a whole number of failures, 0 or more")}
	}
	if pod.Spec.RestartPolicy == corev1.RestartPolicyAlways {
		return field.ErrorList{field.Invalid(p, v,
			"counts failed runs, but a pod with restartPolicy Always also restarts containers that succeeded; set restartPolicy: OnFailure")}
	}
	return nil
}
