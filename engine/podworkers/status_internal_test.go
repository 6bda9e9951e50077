package podworkers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// TestSameStatus: statuses are the same as the store keeps them: times to
// the second, an empty list as none; any field changed is a change.
func TestSameStatus(t *testing.T) {
	at := time.Date(2026, 12, 7, 3, 4, 5, 0, time.UTC)
	base := func() *corev1.PodStatus {
		return &corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.88.0.5", StartTime: &metav1.Time{Time: at},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, RestartCount: 1,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}}}
	}
	for _, tc := range []struct {
		name   string
		change func(*corev1.PodStatus)
		same   bool
	}{
		{"unchanged", func(*corev1.PodStatus) {}, true},
		{"a time within its second", func(s *corev1.PodStatus) { s.StartTime = &metav1.Time{Time: at.Add(900 * time.Millisecond)} }, true},
		{"an empty list for none", func(s *corev1.PodStatus) { s.InitContainerStatuses = []corev1.ContainerStatus{} }, true},
		{"a time a second later", func(s *corev1.PodStatus) { s.StartTime = &metav1.Time{Time: at.Add(time.Second)} }, false},
		{"phase", func(s *corev1.PodStatus) { s.Phase = corev1.PodSucceeded }, false},
		{"a container's readiness", func(s *corev1.PodStatus) { s.ContainerStatuses[0].Ready = false }, false},
		{"a restart", func(s *corev1.PodStatus) { s.ContainerStatuses[0].RestartCount = 2 }, false},
		{"a condition's reason", func(s *corev1.PodStatus) { s.Conditions[0].Reason = "PodCompleted" }, false},
		{"no start time", func(s *corev1.PodStatus) { s.StartTime = nil }, false},
	} {
		b := base()
		tc.change(b)
		if got := sameStatus(base(), b); got != tc.same {
			t.Errorf("%s: sameStatus = %v, want %v", tc.name, got, tc.same)
		}
	}
}
