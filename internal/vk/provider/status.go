package provider

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// terminated is st with every container that was not terminated marked
// so, as a deleted pod's statuses end.
func terminated(st *corev1.PodStatus) *corev1.PodStatus {
	st = st.DeepCopy()
	now := metav1.Now()
	end := func(cs []corev1.ContainerStatus) {
		for i := range cs {
			if cs[i].State.Terminated != nil {
				continue
			}
			cs[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "PodDeleted", Message: "the pod was deleted", FinishedAt: now,
			}}
			cs[i].Ready = false
			cs[i].Started = new(false)
		}
	}
	end(st.ContainerStatuses)
	end(st.InitContainerStatuses)
	end(st.EphemeralContainerStatuses)
	if st.Phase != corev1.PodSucceeded {
		st.Phase = corev1.PodFailed
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == corev1.PodReady || st.Conditions[i].Type == corev1.ContainersReady {
			st.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	return st
}

// observe sets the observedGeneration of st and of its conditions to gen,
// the metadata.generation of the pod podsyncd last took, as the kubelet
// reports the generation of the pod it synced (podsyncd's own counter of
// its stored pod's changes is another number).
func observe(st *corev1.PodStatus, gen int64) {
	st.ObservedGeneration = gen
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = gen
	}
}

// gateConditions returns the current conditions of pod's readiness gates
// as the API server holds them (set by whoever owns each gate), or nil.
func (p *Provider) gateConditions(pod *corev1.Pod) []corev1.PodCondition {
	if len(pod.Spec.ReadinessGates) == 0 || p.kubeConditions == nil {
		return nil
	}
	return p.kubeConditions(pod.Namespace, pod.Name)
}

// applyReadinessGates is the kubelet's readiness gates
// (pkg/kubelet/status.GeneratePodReadyCondition): the status carries the
// gates' conditions as their owners set them on the API server (current),
// and a pod whose containers are ready is Ready only when every gate's
// condition is True; while one is not, Ready is False with reason
// ReadinessGatesNotReady and the kubelet's message. A pod whose
// containers are not ready keeps podsyncd's Ready (ContainersNotReady).
func applyReadinessGates(pod *corev1.Pod, current []corev1.PodCondition) {
	if len(pod.Spec.ReadinessGates) == 0 {
		return
	}
	st := &pod.Status
	var unready []string
	for _, g := range pod.Spec.ReadinessGates {
		i := slices.IndexFunc(current, func(c corev1.PodCondition) bool { return c.Type == g.ConditionType })
		if i < 0 {
			unready = append(unready, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
			continue
		}
		c := current[i]
		st.Conditions = append(slices.DeleteFunc(st.Conditions, func(x corev1.PodCondition) bool { return x.Type == c.Type }), c)
		if c.Status != corev1.ConditionTrue {
			unready = append(unready, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), c.Status))
		}
	}
	i := slices.IndexFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
	if i < 0 || len(unready) == 0 {
		return
	}
	ready := &st.Conditions[i]
	if ready.Status != corev1.ConditionTrue {
		return // ContainersNotReady (or the pod's end) says more
	}
	ready.Status, ready.Reason, ready.Message = corev1.ConditionFalse, "ReadinessGatesNotReady", strings.Join(unready, ", ")
	ready.LastTransitionTime = metav1.Now()
}
