package podworkers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
)

func TestPodSummary(t *testing.T) {
	waiting := func(reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	}
	for _, c := range []struct {
		name   string
		status corev1.PodStatus
		want   podSummary
	}{
		{"no status yet", corev1.PodStatus{}, podSummary{known: true, phase: corev1.PodPending}},
		{"odd phase", corev1.PodStatus{Phase: "Evicted"}, podSummary{known: true, phase: corev1.PodUnknown}},
		{"back-offs", corev1.PodStatus{
			Phase:                 corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{waiting(plan.ReasonImagePullBackOff)},
			ContainerStatuses: []corev1.ContainerStatus{waiting(plan.ReasonCrashLoopBackOff), waiting(podstatus.ReasonErrImagePull),
				waiting(podstatus.ReasonContainerCreating), {}},
		}, podSummary{known: true, phase: corev1.PodPending, backoffs: 2}},
	} {
		if got := podSummaryOf(&c.status); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
