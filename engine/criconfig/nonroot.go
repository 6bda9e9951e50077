package criconfig

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
)

// effectiveNonRoot returns the runAsNonRoot and runAsUser that apply to
// c: the container's security context over the pod's, as the kubelet's
// securitycontext.DetermineEffectiveSecurityContext has them.
func effectiveNonRoot(pod *corev1.Pod, c *corev1.Container) (nonRoot *bool, user *int64) {
	if psc := pod.Spec.SecurityContext; psc != nil {
		nonRoot, user = psc.RunAsNonRoot, psc.RunAsUser
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
		if sc.RunAsUser != nil {
			user = sc.RunAsUser
		}
	}
	return nonRoot, user
}

// NeedsImageUser reports whether VerifyRunAsNonRoot of c needs its image's
// user: runAsNonRoot is true and no runAsUser says who the container runs
// as.
func NeedsImageUser(pod *corev1.Pod, c *corev1.Container) bool {
	nonRoot, user := effectiveNonRoot(pod, c)
	return nonRoot != nil && *nonRoot && user == nil
}

// ImageUser returns the user an image runs as, from its CRI status, as
// the kubelet's getImageUser does: its numeric uid, else its user name;
// an image that names neither (or an unknown image) runs as root.
func ImageUser(img *runtimeapi.Image) (uid *int64, username string) {
	if img != nil {
		if img.GetUid() != nil {
			v := img.GetUid().GetValue()
			return &v, ""
		}
		if img.GetUsername() != "" {
			return nil, img.GetUsername()
		}
	}
	return new(int64), ""
}

// VerifyRunAsNonRoot is the kubelet's verifyRunAsNonRoot
// (pkg/kubelet/kuberuntime/security_context_others.go): with runAsNonRoot
// true, a container whose runAsUser is 0, or that has no runAsUser and an
// image whose user is root, non-numeric or not a valid uid, is refused
// with the kubelet's message. uid and username are the image's user
// (ImageUser); they are read only when NeedsImageUser. A refusal fails the
// container's start with CreateContainerConfigError.
func VerifyRunAsNonRoot(pod *corev1.Pod, c *corev1.Container, uid *int64, username string) error {
	nonRoot, user := effectiveNonRoot(pod, c)
	if nonRoot == nil || !*nonRoot {
		return nil
	}
	if user != nil {
		if *user == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", model.PodString(pod), c.Name)
		}
		return nil
	}
	switch {
	case uid == nil && len(username) > 0:
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)",
			username, model.PodString(pod), c.Name)
	case uid != nil:
		if *uid == 0 {
			return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", model.PodString(pod), c.Name)
		}
		if errs := validation.IsValidUserID(*uid); len(errs) > 0 {
			return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): %s (pod: %q, container: %s)",
				*uid, math.MaxInt32, strings.Join(errs, "; "), model.PodString(pod), c.Name)
		}
	}
	return nil
}
