package admit

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
)

// ReasonAppArmor is the kubelet's reason for a pod asking an AppArmor
// profile the node cannot enforce.
const ReasonAppArmor = "AppArmor"

// checkAppArmor is the kubelet's AppArmor admit handler
// (pkg/kubelet/lifecycle/handlers.go, pkg/security/apparmor): a pod that
// asks any profile but Unconfined — in a field or the deprecated
// annotations — needs AppArmor enabled on the host, and a Localhost
// profile needs a name. Like the kubelet it runs on admission only, not on
// every apply of a running pod.
func checkAppArmor(pod *corev1.Pod, node Node) Result {
	if !appArmorRequired(pod) {
		return Result{Admit: true}
	}
	if !node.AppArmor {
		return reject(ReasonAppArmor, "Cannot enforce AppArmor: AppArmor is not enabled on the host")
	}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		p := criconfig.AppArmorProfileOf(pod, &c)
		if p != nil && p.Type == corev1.AppArmorProfileTypeLocalhost && (p.LocalhostProfile == nil || strings.TrimSpace(*p.LocalhostProfile) == "") {
			return reject(ReasonAppArmor, "Cannot enforce AppArmor: invalid empty AppArmor profile name: %q", fmt.Sprint(p))
		}
	}
	return Result{Admit: true}
}

// appArmorRequired is upstream's isRequired: any profile other than
// Unconfined, in the pod's or a container's field or an annotation.
func appArmorRequired(pod *corev1.Pod) bool {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.AppArmorProfile != nil && sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
		return true
	}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if sc := c.SecurityContext; sc != nil && sc.AppArmorProfile != nil && sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
			return true
		}
	}
	for key, value := range pod.Annotations {
		// Upstream returns at the first such annotation, in map order;
		// any one asking a profile requires AppArmor.
		if strings.HasPrefix(key, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && value != corev1.DeprecatedAppArmorBetaProfileNameUnconfined {
			return true
		}
	}
	return false
}
