package criconfig

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// ReferencedObjects returns the ConfigMaps and Secrets of cms and secrets
// that pod refers to — in any container's env and envFrom, in configMap
// and secret volumes and projected sources, in imagePullSecrets — matched as the configs and
// the syncer match them (by name, in the pod's namespace or with none).
// What else a request carried is not the pod's to keep: a pod's stored
// record holds only what it can use.
func ReferencedObjects(pod *corev1.Pod, cms []*corev1.ConfigMap, secrets []*corev1.Secret) ([]*corev1.ConfigMap, []*corev1.Secret) {
	cmNames, secretNames := ReferencedNames(pod)
	var outCMs []*corev1.ConfigMap
	for _, cm := range cms {
		if cm != nil && cmNames[cm.Name] && (cm.Namespace == pod.Namespace || cm.Namespace == "") {
			outCMs = append(outCMs, cm)
		}
	}
	var outSecrets []*corev1.Secret
	for _, s := range secrets {
		if s != nil && secretNames[s.Name] && (s.Namespace == pod.Namespace || s.Namespace == "") {
			outSecrets = append(outSecrets, s)
		}
	}
	return outCMs, outSecrets
}

// ReferencedNames returns the names of the ConfigMaps and Secrets of the
// pod's namespace that pod refers to, as ReferencedObjects matches them.
func ReferencedNames(pod *corev1.Pod) (configMaps, secrets map[string]bool) {
	cmNames, secretNames := map[string]bool{}, map[string]bool{}
	for _, ref := range pod.Spec.ImagePullSecrets {
		secretNames[ref.Name] = true
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			cmNames[v.ConfigMap.Name] = true
		}
		if v.Secret != nil {
			secretNames[v.Secret.SecretName] = true
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					cmNames[src.ConfigMap.Name] = true
				}
				if src.Secret != nil {
					secretNames[src.Secret.Name] = true
				}
			}
		}
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				cmNames[e.ConfigMapRef.Name] = true
			}
			if e.SecretRef != nil {
				secretNames[e.SecretRef.Name] = true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				cmNames[r.Name] = true
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				secretNames[r.Name] = true
			}
		}
	}
	return cmNames, secretNames
}
