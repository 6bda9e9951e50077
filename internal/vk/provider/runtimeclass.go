package provider

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// RuntimeClasses reads the API server's RuntimeClasses, as the kubelet's
// runtimeclass manager reads them from its informer.
type RuntimeClasses interface {
	// Handler returns the handler of the RuntimeClass name, or the
	// lister's error (NotFound when there is no such RuntimeClass).
	Handler(name string) (string, error)
}

// UseRuntimeClasses makes the provider send a pod's runtimeClassName to
// podsyncd as its RuntimeClass's handler, which podsyncd gives the
// runtime's RunPodSandbox; call it before the first pod. Without it the
// name is sent as it is, and podsyncd takes it for the handler.
func (p *Provider) UseRuntimeClasses(rc RuntimeClasses) { p.runtimeClasses = rc }

// ReasonFailedCreatePodSandBox is the kubelet's event reason of a sandbox
// it could not create.
const ReasonFailedCreatePodSandBox = "FailedCreatePodSandBox"

// runtimeHandler is the kubelet's LookupRuntimeHandler for pod: the
// handler of its RuntimeClass, "" for none. A RuntimeClass the API server
// does not have fails the pod's sandbox on a kubelet, which records
// FailedCreatePodSandBox ("Failed to create pod sandbox: runtimeclass.
// node.k8s.io "x" not found") and leaves the pod Pending, retrying; so
// does the provider: it records that event and returns the error, which
// the node library retries with back-off, until the RuntimeClass exists.
func (p *Provider) runtimeHandler(pod *corev1.Pod) (*string, error) {
	name := pod.Spec.RuntimeClassName
	if name == nil || *name == "" || p.runtimeClasses == nil {
		return name, nil
	}
	handler, err := p.runtimeClasses.Handler(*name)
	if err != nil {
		if p.events != nil {
			p.events.Event(pod, corev1.EventTypeWarning, ReasonFailedCreatePodSandBox, fmt.Sprintf("Failed to create pod sandbox: %v", err))
		}
		return nil, fmt.Errorf("runtime class %q of pod %s/%s: %w", *name, pod.Namespace, pod.Name, err)
	}
	if handler == "" {
		return nil, nil
	}
	return &handler, nil
}
