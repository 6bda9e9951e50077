package model

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// PodString is the kubelet's format.Pod: name_namespace(uid).
func PodString(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// IsRestartableInitContainer reports whether c is a native sidecar: an
// init container with restartPolicy Always.
func IsRestartableInitContainer(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// SpecContainer returns the init, regular or ephemeral container named
// name, or nil. An ephemeral container is returned as the Container its
// EphemeralContainerCommon is (the kubelet's conversion).
func SpecContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	if ec := EphemeralContainer(pod, name); ec != nil {
		return (*corev1.Container)(&ec.EphemeralContainerCommon)
	}
	return nil
}

// EphemeralContainer returns the ephemeral container named name, or nil.
func EphemeralContainer(pod *corev1.Pod, name string) *corev1.EphemeralContainer {
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return &pod.Spec.EphemeralContainers[i]
		}
	}
	return nil
}

// IsTerminal reports whether phase is terminal: Succeeded or Failed.
func IsTerminal(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}
