package podstatus

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
)

// Condition reasons, as the kubelet's pkg/kubelet/status.
const (
	ReasonUnknownContainerStatuses = "UnknownContainerStatuses"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

func podReadyToStartContainersCondition(pod *corev1.Pod, view *model.RuntimeView) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}
	if plan.PodSandboxChanged(pod, view).Create {
		c.Status = corev1.ConditionFalse
	}
	return c
}

// hasAnyRegularContainerStarted is the kubelet's.
func hasAnyRegularContainerStarted(pod *corev1.Pod, statuses []corev1.ContainerStatus) bool {
	for i := range pod.Spec.Containers {
		if st := findStatus(statuses, pod.Spec.Containers[i].Name); st != nil && (st.State.Running != nil || st.State.Terminated != nil) {
			return true
		}
	}
	return false
}

func podInitializedCondition(pod *corev1.Pod, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
	if len(pod.Spec.InitContainers) == 0 {
		return c
	}
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		st := findStatus(statuses, ic.Name)
		if st == nil {
			unknown = append(unknown, ic.Name)
			continue
		}
		if model.IsRestartableInitContainer(ic) {
			if st.Started == nil || !*st.Started {
				incomplete = append(incomplete, ic.Name)
			}
			continue
		}
		if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			incomplete = append(incomplete, ic.Name)
		}
	}
	if phase == corev1.PodSucceeded && len(unknown) == 0 {
		c.Reason = ReasonPodCompleted
		return c
	}
	if hasAnyRegularContainerStarted(pod, statuses) {
		return c
	}
	if msg := unreadyMessage(unknown, "containers with incomplete status", incomplete); msg != "" {
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, ReasonContainersNotInitialized, msg
	}
	return c
}

func unreadyMessage(unknown []string, label string, names []string) string {
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(names) > 0 {
		msgs = append(msgs, fmt.Sprintf("%s: %s", label, names))
	}
	out := ""
	for i, m := range msgs {
		if i > 0 {
			out += ", "
		}
		out += m
	}
	return out
}

func containersReadyCondition(pod *corev1.Pod, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
	var unknown, unready []string
	check := func(name string) {
		if st := findStatus(statuses, name); st == nil {
			unknown = append(unknown, name)
		} else if !st.Ready {
			unready = append(unready, name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if model.IsRestartableInitContainer(&pod.Spec.InitContainers[i]) {
			check(pod.Spec.InitContainers[i].Name)
		}
	}
	for i := range pod.Spec.Containers {
		check(pod.Spec.Containers[i].Name)
	}
	if phase == corev1.PodSucceeded && len(unknown) == 0 {
		c.Status, c.Reason = corev1.ConditionFalse, ReasonPodCompleted
		return c
	}
	if phase == corev1.PodFailed {
		c.Status, c.Reason = corev1.ConditionFalse, ReasonPodFailed
		return c
	}
	if msg := unreadyMessage(unknown, "containers with unready status", unready); msg != "" {
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, ReasonContainersNotReady, msg
	}
	return c
}

func podReadyCondition(pod *corev1.Pod, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	cr := containersReadyCondition(pod, statuses, phase)
	c := corev1.PodCondition{Type: corev1.PodReady, Status: cr.Status, Reason: cr.Reason, Message: cr.Message}
	if c.Status != corev1.ConditionTrue {
		return c
	}
	var missing, unready []string
	for _, g := range pod.Spec.ReadinessGates {
		found := false
		for _, pc := range pod.Status.Conditions {
			if pc.Type == g.ConditionType {
				found = true
				if pc.Status != corev1.ConditionTrue {
					unready = append(unready, string(g.ConditionType))
				}
			}
		}
		if !found {
			missing = append(missing, string(g.ConditionType))
		}
	}
	var msgs []string
	if len(missing) > 0 {
		msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", missing))
	}
	if len(unready) > 0 {
		msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but False.", unready))
	}
	if len(msgs) > 0 {
		c.Status, c.Reason = corev1.ConditionFalse, ReasonReadinessGatesNotReady
		for i, m := range msgs {
			if i > 0 {
				c.Message += ", "
			}
			c.Message += m
		}
	}
	return c
}
