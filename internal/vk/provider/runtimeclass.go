package provider

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// runtime's RunPodSandbox; call it before the first pod, and call
// RuntimeClassChanged when a RuntimeClass is created or changed. Without
// it the name is sent as it is, and podsyncd takes it for the handler.
func (p *Provider) UseRuntimeClasses(rc RuntimeClasses) { p.runtimeClasses = rc }

// ReasonFailedCreatePodSandBox is the kubelet's event reason of a sandbox
// it could not create.
const ReasonFailedCreatePodSandBox = "FailedCreatePodSandBox"

// missingRuntimeClass is runtimeHandler's error for a RuntimeClass the
// API server does not have.
type missingRuntimeClass struct {
	name string
	err  error
}

func (e *missingRuntimeClass) Error() string { return e.err.Error() }
func (e *missingRuntimeClass) Unwrap() error { return e.err }

// runtimeHandler is the kubelet's LookupRuntimeHandler for pod: the
// handler of its RuntimeClass, nil for the runtime's default. A
// RuntimeClass the API server does not have is a *missingRuntimeClass.
func (p *Provider) runtimeHandler(pod *corev1.Pod) (*string, error) {
	name := pod.Spec.RuntimeClassName
	if name == nil || *name == "" || p.runtimeClasses == nil {
		return name, nil
	}
	handler, err := p.runtimeClasses.Handler(*name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &missingRuntimeClass{name: *name, err: err}
	case err != nil:
		return nil, fmt.Errorf("runtime class %q: %w", *name, err)
	case handler == "":
		return nil, nil
	}
	return &handler, nil
}

// waitForRuntimeClass is what the kubelet does with a pod whose
// RuntimeClass the API server does not have (a RuntimeClass deleted after
// the pod was admitted): its sandbox cannot be created, so it records
// FailedCreatePodSandBox ("Failed to create pod sandbox: runtimeclass.
// node.k8s.io "x" not found"), leaves the pod Pending, its containers
// waiting in ContainerCreating, and tries again. The provider reports
// that status without applying the pod on podsyncd, and applies it when
// the RuntimeClass appears (RuntimeClassChanged). It never fails the pod,
// which the node library would do with an error from CreatePod (a
// restartPolicy Never pod becomes Failed/ProviderFailed).
func (p *Provider) waitForRuntimeClass(k string, pod *corev1.Pod, missing *missingRuntimeClass) {
	if p.events != nil {
		p.events.Event(pod, corev1.EventTypeWarning, ReasonFailedCreatePodSandBox, fmt.Sprintf("Failed to create pod sandbox: %v", missing.err))
	}
	p.log.Info("pod waits for its RuntimeClass", zap.String("pod", k), zap.String("runtime_class", missing.name))
	p.mu.Lock()
	p.rejected[k] = creatingStatus(pod)
	p.waitingClass[k] = missing.name
	p.applied[k] = pod.Generation
	p.mu.Unlock()
	p.changed(k)
}

// RuntimeClassChanged applies the pods that wait for the RuntimeClass
// name, now that the API server has it.
func (p *Provider) RuntimeClassChanged(ctx context.Context, name string) {
	var waiting []*corev1.Pod
	p.mu.Lock()
	for k, class := range p.waitingClass {
		if pod := p.pods[k]; class == name && pod != nil {
			waiting = append(waiting, pod.DeepCopy())
		}
	}
	p.mu.Unlock()
	for _, pod := range waiting {
		if err := p.apply(ctx, pod); err != nil {
			p.log.Warn("could not apply a pod whose RuntimeClass appeared; the node library applies it again on its next update",
				zap.String("pod", key(pod.Namespace, pod.Name)), zap.String("runtime_class", name), zap.Error(err))
		}
	}
}

// creatingStatus is the kubelet's status of a pod whose sandbox is not
// created yet: Pending, its containers waiting (ContainerCreating, or
// PodInitializing behind init containers), not ready; the scheduler's
// condition and the QoS class the API server set are kept.
func creatingStatus(pod *corev1.Pod) *corev1.PodStatus {
	now := metav1.Now()
	st := &corev1.PodStatus{Phase: corev1.PodPending, QOSClass: pod.Status.QOSClass, HostIP: pod.Status.HostIP, HostIPs: pod.Status.HostIPs}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			st.Conditions = append(st.Conditions, c)
		}
	}
	initialized := corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now}
	if len(pod.Spec.InitContainers) > 0 {
		initialized.Status, initialized.Reason = corev1.ConditionFalse, "ContainersNotInitialized"
		initialized.Message = "containers with incomplete status: " + containerNames(pod.Spec.InitContainers)
	}
	notReady := "containers with unready status: " + containerNames(pod.Spec.Containers)
	st.Conditions = append(st.Conditions,
		corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, LastTransitionTime: now},
		initialized,
		corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: notReady, LastTransitionTime: now},
		corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: notReady, LastTransitionTime: now},
	)
	waiting := func(c corev1.Container, reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	}
	reason := "ContainerCreating"
	if len(pod.Spec.InitContainers) > 0 {
		reason = "PodInitializing"
	}
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, waiting(c, "PodInitializing"))
	}
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, waiting(c, reason))
	}
	return st
}

// containerNames is the kubelet's list of containers in a condition's message:
// "[a b]".
func containerNames(cs []corev1.Container) string {
	out := "["
	for i, c := range cs {
		if i > 0 {
			out += " "
		}
		out += c.Name
	}
	return out + "]"
}
