package server_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
)

func memoryPod(t *testing.T, limit string) *podsyncv1.Pod {
	t.Helper()
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse(limit)}
	p, err := convert.PodToProto(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: testImage, Command: []string{"sleep", "inf"},
			Resources: corev1.ResourceRequirements{Requests: l.DeepCopy(), Limits: l},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanPodShowsAResize: a raised memory limit of a running container is
// its own action in PlanPod, with the current and desired resources and
// no kill; SyncPod reports the UpdateContainerResources step.
func TestPlanPodShowsAResize(t *testing.T) {
	h := newSvcHarness(t)
	h.sync(memoryPod(t, "64Mi"))

	resp, err := h.c.PlanPod(h.ctx, &podsyncv1.PlanPodRequest{Pod: memoryPod(t, "128Mi")})
	if err != nil {
		t.Fatal(err)
	}
	p := resp.GetPlan()
	if len(p.GetContainersToKill()) != 0 || len(p.GetContainersToStart()) != 0 || p.GetUpToDate() {
		t.Errorf("plan %v: want a resize only, not up to date", p)
	}
	rs := p.GetContainersToResize()
	if len(rs) != 1 || rs[0].GetName() != "app" || rs[0].GetContainerId() == "" ||
		rs[0].GetContainerType() != podsyncv1.ContainerType_CONTAINER_TYPE_REGULAR ||
		rs[0].GetCurrent().GetLimits()["memory"] != "64Mi" || rs[0].GetDesired().GetLimits()["memory"] != "128Mi" ||
		rs[0].GetDesired().GetLimits()["cpu"] != "100m" {
		t.Fatalf("containers_to_resize %v, want app from 64Mi to 128Mi", rs)
	}

	steps, _ := h.sync(memoryPod(t, "128Mi"))
	var resized bool
	for _, s := range steps {
		switch s.GetAction() {
		case podsyncv1.StepAction_STEP_ACTION_UPDATE_CONTAINER_RESOURCES:
			resized = s.GetTarget() == "app" && s.GetOutcome() == podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED &&
				s.GetContainerId() == rs[0].GetContainerId()
		case podsyncv1.StepAction_STEP_ACTION_KILL_CONTAINER, podsyncv1.StepAction_STEP_ACTION_START_CONTAINER:
			t.Errorf("resize pass step %v", s)
		}
	}
	if !resized {
		t.Errorf("steps %v: no UpdateContainerResources step for app", steps)
	}
}
