package server_test

import (
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/internal/testing/testdaemon"
)

func memoryPod(t *testing.T, limit string) *podsyncv1.Pod {
	t.Helper()
	return namedMemoryPod(t, "web", limit)
}

func namedMemoryPod(t *testing.T, name, limit string) *podsyncv1.Pod {
	t.Helper()
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse(limit)}
	p, err := convert.PodToProto(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
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

	steps, res := h.sync(memoryPod(t, "128Mi"))
	cs := res.GetStatus().GetContainerStatuses()[0]
	if cs.GetResources().GetLimits()["memory"] != "128Mi" || cs.GetResources().GetRequests()["memory"] != "128Mi" ||
		cs.GetAllocatedResources()["memory"] != "128Mi" {
		t.Errorf("container resources %v allocated %v, want the new 128Mi", cs.GetResources(), cs.GetAllocatedResources())
	}
	for _, c := range res.GetStatus().GetConditions() {
		if c.GetType() == string(corev1.PodResizePending) || c.GetType() == string(corev1.PodResizeInProgress) {
			t.Errorf("condition %v after the resize", c)
		}
	}
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

// TestResizeBeyondAllocatableIsDeferred: a resize whose requests do not
// fit the node's allocatable is pending with the kubelet's reason and
// message, in PlanPod and in the status, and nothing is resized; the
// status shows the resources the container runs with.
func TestResizeBeyondAllocatableIsDeferred(t *testing.T) {
	h := newHarness(t, testdaemon.Options{Transport: testdaemon.Bufconn, Logger: zaptest.NewLogger(t),
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("100Mi")}}, nil)
	h.sync(memoryPod(t, "64Mi"))
	const msg = "Node didn't have enough resource: memory, requested: 201326592, used: 0, capacity: 104857600"

	resp, err := h.c.PlanPod(h.ctx, &podsyncv1.PlanPodRequest{Pod: memoryPod(t, "192Mi")})
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.GetPlan(); len(p.GetContainersToResize()) != 0 || p.GetResizePending().GetReason() != "Deferred" ||
		p.GetResizePending().GetMessage() != msg {
		t.Errorf("plan %v: want no resize, pending Deferred: %s", p, msg)
	}

	steps, res := h.sync(memoryPod(t, "192Mi"))
	for _, s := range steps {
		if s.GetAction() != podsyncv1.StepAction_STEP_ACTION_CONFIG_POD_SANDBOX {
			t.Errorf("deferred resize pass step %v", s)
		}
	}
	var pending *podsyncv1.PodCondition
	for _, c := range res.GetStatus().GetConditions() {
		if c.GetType() == string(corev1.PodResizePending) {
			pending = c
		}
	}
	if pending == nil || pending.GetStatus() != "True" || pending.GetReason() != "Deferred" || pending.GetMessage() != msg {
		t.Errorf("conditions %v: want PodResizePending Deferred: %s", res.GetStatus().GetConditions(), msg)
	}
	cs := res.GetStatus().GetContainerStatuses()[0]
	if cs.GetResources().GetLimits()["memory"] != "64Mi" || cs.GetAllocatedResources()["memory"] != "64Mi" {
		t.Errorf("container resources %v allocated %v, want 64Mi as it runs", cs.GetResources(), cs.GetAllocatedResources())
	}
}

// TestDeferredResizeIsRetriedWhenAPodLeaves: as the kubelet's allocation
// manager retries pending resizes when pods are removed, a resize that did
// not fit is applied once another pod's deletion makes room, with no
// further request.
func TestDeferredResizeIsRetriedWhenAPodLeaves(t *testing.T) {
	h := newHarness(t, testdaemon.Options{Transport: testdaemon.Bufconn, Logger: zaptest.NewLogger(t),
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("100Mi")}}, nil)
	h.sync(namedMemoryPod(t, "web", "40Mi"))
	h.sync(namedMemoryPod(t, "other", "40Mi"))
	_, res := h.sync(namedMemoryPod(t, "web", "80Mi"))
	if !hasCondition(res.GetStatus(), corev1.PodResizePending) {
		t.Fatalf("conditions %v: want the resize pending", res.GetStatus().GetConditions())
	}

	if _, err := h.c.DeletePod(h.ctx, &podsyncv1.DeletePodRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"})
		if err != nil {
			t.Fatal(err)
		}
		st := resp.GetPod().GetStatus()
		if !hasCondition(st, corev1.PodResizePending) && st.GetContainerStatuses()[0].GetResources().GetLimits()["memory"] == "80Mi" {
			return
		}
		select {
		case <-h.ctx.Done():
			t.Fatalf("the resize was not retried after the deletion: status %v", st)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func hasCondition(st *podsyncv1.PodStatus, typ corev1.PodConditionType) bool {
	for _, c := range st.GetConditions() {
		if c.GetType() == string(typ) && c.GetStatus() == "True" {
			return true
		}
	}
	return false
}
