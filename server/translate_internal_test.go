package server

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/plan"
)

// TestPlanShowsPrunedInitInstances: PlanPod lists the dead init container
// instances a pass would prune, and such a plan is not up to date.
func TestPlanShowsPrunedInitInstances(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init"}}}}
	a := plan.PodActions{
		Sandbox: plan.SandboxDecision{ID: "sb1", Reason: plan.SandboxReasonReady},
		PruneInit: []plan.ContainerAction{
			{Name: "init", ContainerID: "c-1", Reason: plan.ReasonInitContainerPruned},
			{Name: "init", ContainerID: "c-0", Reason: plan.ReasonInitContainerPruned},
		},
	}
	got := planToProto(pod, a, time.Now())
	if ids := got.GetInitInstancesToRemove(); !slices.Equal(ids, []string{"c-1", "c-0"}) {
		t.Errorf("init_instances_to_remove = %v, want [c-1 c-0]", ids)
	}
	if got.GetUpToDate() {
		t.Error("a plan that prunes is up to date")
	}
}
