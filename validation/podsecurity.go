package validation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psapi "k8s.io/pod-security-admission/api"
)

// AnnotationPodSecurity is the Pod Security level a pod asks for beyond
// the node's: the stricter of the two is enforced, so it can only narrow
// what the node admits. podsync-vk sets it to the enforce level of the
// pod's namespace (its pod-security.kubernetes.io/enforce label), as the
// API server enforces each namespace's level; the node's own level stays
// the operator's ceiling.
const AnnotationPodSecurity = "podsync.io/pod-security"

// PodSecurityLevel is the level the pod asks for, if it names a valid
// one.
func PodSecurityLevel(pod *corev1.Pod) (psapi.Level, bool) {
	v, ok := pod.Annotations[AnnotationPodSecurity]
	if !ok {
		return "", false
	}
	l, err := psapi.ParseLevel(v)
	if err != nil {
		return "", false
	}
	return l, true
}

// podSecurityAnnotation checks the level the pod asks for: privileged,
// baseline or restricted.
func podSecurityAnnotation(pod *corev1.Pod, fldPath *field.Path) field.ErrorList {
	v, ok := pod.Annotations[AnnotationPodSecurity]
	if !ok {
		return nil
	}
	if _, valid := PodSecurityLevel(pod); !valid {
		return field.ErrorList{field.NotSupported(fldPath.Child("metadata", "annotations").Key(AnnotationPodSecurity), v,
			[]string{string(psapi.LevelPrivileged), string(psapi.LevelBaseline), string(psapi.LevelRestricted)})}
	}
	return nil
}
