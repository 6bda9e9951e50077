package provider

import (
	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// recordEvent records a podsyncd event about the pod k (of podsync uid)
// on its Kubernetes pod, with the field path of its container as the
// kubelet's (spec.containers{name}, spec.initContainers{name},
// spec.ephemeralContainers{name}).
func (p *Provider) recordEvent(k, uid string, ev *podsyncv1.PodEvent) {
	if p.events == nil {
		return
	}
	p.mu.Lock()
	pod := p.pods[k]
	p.mu.Unlock()
	if pod == nil || string(pod.UID) != uid {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
		UID: pod.UID, ResourceVersion: pod.ResourceVersion, FieldPath: containerFieldPath(pod, ev.GetContainer())}
	typ := corev1.EventTypeNormal
	if ev.GetType() == podsyncv1.EventType_EVENT_TYPE_WARNING {
		typ = corev1.EventTypeWarning
	}
	p.events.Event(ref, typ, ev.GetReason(), ev.GetMessage())
}

// containerFieldPath is the kubelet's field path of a pod's container
// (pkg/kubelet/container.GenerateContainerRef); "" for none.
func containerFieldPath(pod *corev1.Pod, name string) string {
	if name == "" {
		return ""
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return "spec.initContainers{" + name + "}"
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return "spec.ephemeralContainers{" + name + "}"
		}
	}
	return "spec.containers{" + name + "}"
}
