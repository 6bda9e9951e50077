package syncer_test

import (
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

func limits(kv ...string) corev1.ResourceRequirements {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return corev1.ResourceRequirements{Requests: l.DeepCopy(), Limits: l}
}

// resizePod is enginetest.Pod with app and helper limited to cpu and memory.
func resizePod(app, helper corev1.ResourceRequirements) *corev1.Pod {
	pod := enginetest.Pod()
	pod.Spec.Containers[0].Resources = app
	pod.Spec.Containers[1].Resources = helper
	return pod
}

// runtimeResources returns what the fake runtime reports the container runs with.
func runtimeResources(t *testing.T, h *syncertest.Harness, id string) *runtimeapi.LinuxContainerResources {
	t.Helper()
	resp, err := h.RT.ContainerStatus(h.Ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetStatus().GetResources().GetLinux()
}

// callsOf keeps the resize calls of calls.
func callsOf(calls []string) []string {
	return slices.DeleteFunc(calls, func(c string) bool {
		return c != "UpdateContainerResources" && c != "UpdatePodSandboxResources"
	})
}

func TestResizeInPlaceKeepsTheContainer(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "100m", "memory", "64Mi"), limits("cpu", "100m", "memory", "64Mi"))
	res := h.Sync(pod)
	before := syncertest.Newest(t, res, "app")

	pod.Spec.Containers[0].Resources = limits("cpu", "200m", "memory", "128Mi")
	h.Calls()
	res = h.Sync(pod)
	syncertest.WantSteps(t, res,
		"UpdatePodSandboxResources "+before.SandboxID+" ResizePodInPlace",
		"UpdateContainerResources app ResizePodInPlace",
		"UpdatePodSandboxResources "+before.SandboxID+" ResizePodInPlace",
		"UpdateContainerResources app ResizePodInPlace",
	)
	after := syncertest.Newest(t, res, "app")
	if after.ID != before.ID || after.RestartCount != 0 {
		t.Errorf("app is %s with %d restarts, want %s unrestarted", after.ID, after.RestartCount, before.ID)
	}
	lr := runtimeResources(t, h, after.ID)
	if lr.GetMemoryLimitInBytes() != 128<<20 || lr.GetCpuShares() != 204 || lr.GetCpuQuota() != 20000 {
		t.Errorf("runtime resources %+v, want memory 128Mi, shares 204, quota 20000", lr)
	}
	// Resized: the next pass has nothing to do.
	if again := h.Sync(pod); len(again.Steps) != 0 {
		t.Errorf("a pass after the resize did %v", syncertest.Summary(again.Steps))
	}
}

// TestResizeOrder: decreases before increases, and the pod level first
// when it grows, last when it shrinks (the kubelet's doPodResizeAction).
func TestResizeOrder(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "100m", "memory", "64Mi"), limits("cpu", "300m", "memory", "256Mi"))
	res := h.Sync(pod)
	sb := res.SandboxID

	// app grows by less than helper shrinks: the pod shrinks.
	pod.Spec.Containers[0].Resources = limits("cpu", "200m", "memory", "128Mi")
	pod.Spec.Containers[1].Resources = limits("cpu", "100m", "memory", "64Mi")
	res = h.Sync(pod)
	syncertest.WantSteps(t, res,
		"UpdateContainerResources helper ResizePodInPlace",
		"UpdateContainerResources app ResizePodInPlace",
		"UpdatePodSandboxResources "+sb+" ResizePodInPlace",
		"UpdateContainerResources helper ResizePodInPlace",
		"UpdateContainerResources app ResizePodInPlace",
		"UpdatePodSandboxResources "+sb+" ResizePodInPlace",
	)
	var mem []string
	for _, s := range res.Steps {
		if s.Action == syncer.ActionUpdateContainerResources && len(mem) < 2 {
			mem = append(mem, s.Message)
		}
	}
	if len(mem) != 2 || mem[0] != "Resized memory of container helper: cpu shares 307, cpu quota 30000, memory limit 67108864" ||
		mem[1] != "Resized memory of container app: cpu shares 102, cpu quota 10000, memory limit 134217728" {
		t.Errorf("memory steps %q: want the new memory limit with the CPU each container runs with", mem)
	}
}

func TestResizeRestartContainerPolicyRestarts(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "100m", "memory", "64Mi"), limits("cpu", "100m", "memory", "64Mi"))
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	res := h.Sync(pod)
	before := syncertest.Newest(t, res, "app")

	pod.Spec.Containers[0].Resources = limits("cpu", "100m", "memory", "128Mi")
	h.Calls()
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "KillContainer app ResizeRequiresRestart", "ConfigPodSandbox #0", "StartContainer app ResizeRequiresRestart")
	for _, s := range res.Steps {
		if s.Action == syncer.ActionKillContainer && s.Message != "Container app resize requires restart" {
			t.Errorf("kill message %q, want the kubelet's", s.Message)
		}
	}
	if calls := callsOf(h.Calls()); len(calls) != 0 {
		t.Errorf("resize calls %v for a RestartContainer resize", calls)
	}
	after := syncertest.Newest(t, res, "app")
	if after.ID == before.ID || after.RestartCount != 1 {
		t.Errorf("app is %s with %d restarts, want a new instance with 1", after.ID, after.RestartCount)
	}
	if lr := runtimeResources(t, h, after.ID); lr.GetMemoryLimitInBytes() != 128<<20 {
		t.Errorf("restarted with memory limit %d, want 128Mi", lr.GetMemoryLimitInBytes())
	}
	if again := h.Sync(pod); len(again.Steps) != 0 {
		t.Errorf("a pass after the restart did %v", syncertest.Summary(again.Steps))
	}
}

// TestResizeFailureIsReportedAndRetried: a failed UpdateContainerResources
// is a ResizePodInPlaceError step, later steps of the resize are not done,
// and the next pass retries.
func TestResizeFailureIsReportedAndRetried(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "100m", "memory", "64Mi"), limits("cpu", "100m", "memory", "64Mi"))
	res := h.Sync(pod)
	sb := res.SandboxID
	pod.Spec.Containers[0].Resources = limits("cpu", "100m", "memory", "32Mi")
	h.RT.InjectError("UpdateContainerResources", errors.New("runc update: memory in use"))
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "UpdateContainerResources app !ResizePodInPlaceError")
	step := syncertest.FailedStep(t, res, syncer.ActionUpdateContainerResources, "app")
	if step.Message != `update memory of container "app": runc update: memory in use` {
		t.Errorf("message %q", step.Message)
	}
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "UpdateContainerResources app ResizePodInPlace", "UpdatePodSandboxResources "+sb+" ResizePodInPlace")
}

// TestResizeWithoutUpdatePodSandboxResources: a runtime without the call
// (containerd 1.6) still resizes the containers, as the kubelet's
// best-effort updatePodSandboxResources.
func TestResizeWithoutUpdatePodSandboxResources(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "100m", "memory", "64Mi"), limits("cpu", "100m", "memory", "64Mi"))
	res := h.Sync(pod)
	pod.Spec.Containers[0].Resources = limits("cpu", "100m", "memory", "128Mi")
	h.RT.InjectError("UpdatePodSandboxResources", status.Error(codes.Unimplemented, "unknown method UpdatePodSandboxResources"))
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "UpdatePodSandboxResources "+res.SandboxID+" ResizePodInPlace", "UpdateContainerResources app ResizePodInPlace")
	if res.Err() != nil {
		t.Errorf("pass failed: %v", res.Err())
	}
	if lr := runtimeResources(t, h, syncertest.Newest(t, res, "app").ID); lr.GetMemoryLimitInBytes() != 128<<20 {
		t.Errorf("memory limit %d, want 128Mi", lr.GetMemoryLimitInBytes())
	}
}
