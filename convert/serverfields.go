package convert

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeAPIAccessPrefix starts the name of the volume the ServiceAccount
// admission plugin injects into every pod ("kube-api-access-8xk2p").
const kubeAPIAccessPrefix = "kube-api-access-"

// DropServerFields clears what the API server, not the author, writes
// into a pod, so that a `kubectl get pod -o yaml` dump reads as the pod it
// was made from: metadata.resourceVersion, generation, managedFields,
// selfLink, creationTimestamp, deletionTimestamp,
// deletionGracePeriodSeconds and ownerReferences, spec.priority and
// spec.preemptionPolicy (the Priority admission plugin's), the status, and
// the kube-api-access-* projected volume the ServiceAccount admission
// plugin injects, with its mounts (recognised by its shape: a service
// account token, the kube-root-ca.crt ConfigMap and the namespace from the
// downward API). metadata.uid is kept: it identifies the pod. It returns
// the paths it cleared, in that order.
func DropServerFields(pod *corev1.Pod) []string {
	var dropped []string
	drop := func(set bool, path string) bool {
		if set {
			dropped = append(dropped, path)
		}
		return set
	}
	m := &pod.ObjectMeta
	if drop(m.ResourceVersion != "", "metadata.resourceVersion") {
		m.ResourceVersion = ""
	}
	if drop(m.Generation != 0, "metadata.generation") {
		m.Generation = 0
	}
	if drop(len(m.ManagedFields) > 0, "metadata.managedFields") {
		m.ManagedFields = nil
	}
	//nolint:staticcheck // SA1019: old servers still wrote it, and old dumps carry it
	if drop(m.SelfLink != "", "metadata.selfLink") {
		m.SelfLink = "" //nolint:staticcheck // SA1019: as above
	}
	if drop(!m.CreationTimestamp.IsZero(), "metadata.creationTimestamp") {
		m.CreationTimestamp = metav1.Time{}
	}
	if drop(m.DeletionTimestamp != nil, "metadata.deletionTimestamp") {
		m.DeletionTimestamp = nil
	}
	if drop(m.DeletionGracePeriodSeconds != nil, "metadata.deletionGracePeriodSeconds") {
		m.DeletionGracePeriodSeconds = nil
	}
	if drop(len(m.OwnerReferences) > 0, "metadata.ownerReferences") {
		m.OwnerReferences = nil
	}
	if drop(pod.Spec.Priority != nil, "spec.priority") {
		pod.Spec.Priority = nil
	}
	if drop(pod.Spec.PreemptionPolicy != nil, "spec.preemptionPolicy") {
		pod.Spec.PreemptionPolicy = nil
	}
	if drop(!isZeroPodStatus(&pod.Status), "status") {
		pod.Status = corev1.PodStatus{}
	}
	for i := 0; i < len(pod.Spec.Volumes); i++ {
		v := pod.Spec.Volumes[i]
		if !isKubeAPIAccessVolume(v) {
			continue
		}
		dropped = append(dropped, "volume "+v.Name+" and its mounts (the service account token the API server injects)")
		pod.Spec.Volumes = append(pod.Spec.Volumes[:i], pod.Spec.Volumes[i+1:]...)
		i--
		dropMounts(pod.Spec.InitContainers, v.Name)
		dropMounts(pod.Spec.Containers, v.Name)
	}
	return dropped
}

// isKubeAPIAccessVolume reports whether v is the volume the
// ServiceAccount admission plugin injects.
func isKubeAPIAccessVolume(v corev1.Volume) bool {
	p := v.Projected
	if !strings.HasPrefix(v.Name, kubeAPIAccessPrefix) || p == nil || len(p.Sources) != 3 {
		return false
	}
	var token, ca, ns bool
	for _, s := range p.Sources {
		switch {
		case s.ServiceAccountToken != nil && s.ServiceAccountToken.Audience == "":
			token = true
		case s.ConfigMap != nil && s.ConfigMap.Name == "kube-root-ca.crt":
			ca = true
		case s.DownwardAPI != nil && len(s.DownwardAPI.Items) == 1 && s.DownwardAPI.Items[0].FieldRef != nil &&
			s.DownwardAPI.Items[0].FieldRef.FieldPath == "metadata.namespace":
			ns = true
		}
	}
	return token && ca && ns
}

func dropMounts(cs []corev1.Container, volume string) {
	for i := range cs {
		mounts := cs[i].VolumeMounts[:0]
		for _, m := range cs[i].VolumeMounts {
			if m.Name != volume {
				mounts = append(mounts, m)
			}
		}
		cs[i].VolumeMounts = mounts
		if len(mounts) == 0 {
			cs[i].VolumeMounts = nil
		}
	}
}

// DropIdentityFields handles the service account fields podsync accepts
// but cannot honour in full — podsync has no API server to issue a token,
// so none is mounted: spec.serviceAccountName is kept (the downward API's
// spec.serviceAccountName reads it), spec.serviceAccount, its deprecated
// alias, is folded into it as the API server's conversion does, and
// spec.automountServiceAccountToken is cleared. It returns the paths of
// the fields that were given, for a notice.
func DropIdentityFields(pod *corev1.Pod) []string {
	var given []string
	s := &pod.Spec
	if s.ServiceAccountName != "" {
		given = append(given, "spec.serviceAccountName")
	}
	if s.DeprecatedServiceAccount != "" {
		given = append(given, "spec.serviceAccount")
		if s.ServiceAccountName == "" {
			s.ServiceAccountName = s.DeprecatedServiceAccount
		}
		s.DeprecatedServiceAccount = ""
	}
	if s.AutomountServiceAccountToken != nil {
		given = append(given, "spec.automountServiceAccountToken")
		s.AutomountServiceAccountToken = nil
	}
	return given
}
