package syncer_test

import (
	"errors"
	"slices"
	"testing"
	"time"

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

// TestResizeRestartContainerPolicyRestarts: a resize under
// RestartContainer kills the container, tells the runtime the pod's new
// resources (the kubelet's UpdatePodResources, between the kill and the
// start) and starts it with the new ones; nothing is resized in place.
func TestResizeRestartContainerPolicyRestarts(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "100m", "memory", "64Mi"), limits("cpu", "100m", "memory", "64Mi"))
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	res := h.Sync(pod)
	before := syncertest.Newest(t, res, "app")
	sb := res.SandboxID

	pod.Spec.Containers[0].Resources = limits("cpu", "100m", "memory", "128Mi")
	h.Calls()
	res = h.Sync(pod)
	syncertest.WantSteps(t, res,
		"KillContainer app ResizeRequiresRestart",
		"ConfigPodSandbox #0",
		"UpdatePodSandboxResources "+sb+" ResizePodInPlace",
		"StartContainer app ResizeRequiresRestart",
	)
	for _, s := range res.Steps {
		if s.Action == syncer.ActionKillContainer && s.Message != "Container app resize requires restart" {
			t.Errorf("kill message %q, want the kubelet's", s.Message)
		}
		if s.Action == syncer.ActionUpdatePodSandboxResources &&
			s.Message != "Updated the pod's resources: cpu shares 204, cpu quota 20000, memory limit 201326592" {
			t.Errorf("pod-level message %q, want the pod's new aggregate: 192Mi of memory", s.Message)
		}
	}
	calls := h.Calls()
	if got := callsOf(slices.Clone(calls)); !slices.Equal(got, []string{"UpdatePodSandboxResources"}) {
		t.Errorf("resize calls %v, want the pod level only", got)
	}
	stop, update, create := slices.Index(calls, "StopContainer"), slices.Index(calls, "UpdatePodSandboxResources"), slices.Index(calls, "CreateContainer")
	if stop < 0 || stop > update || update > create {
		t.Errorf("calls %v: want UpdatePodSandboxResources between the kill and the create", calls)
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

// TestResizeByRestartShrinksThePod: a decrease under RestartContainer
// gives the runtime the pod's smaller aggregate, before the start.
func TestResizeByRestartShrinksThePod(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "200m", "memory", "128Mi"), limits("cpu", "100m", "memory", "64Mi"))
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{
		{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer},
		{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
	}
	sb := h.Sync(pod).SandboxID
	pod.Spec.Containers[0].Resources = limits("cpu", "100m", "memory", "32Mi")
	res := h.Sync(pod)
	// Memory, then CPU: one update each, as the kubelet's
	// doPodResizeAction updates the pod level per resource.
	syncertest.WantSteps(t, res,
		"KillContainer app ResizeRequiresRestart",
		"ConfigPodSandbox #0",
		"UpdatePodSandboxResources "+sb+" ResizePodInPlace",
		"UpdatePodSandboxResources "+sb+" ResizePodInPlace",
		"StartContainer app ResizeRequiresRestart",
	)
	want := []string{
		"Updated the pod's resources: cpu shares 307, cpu quota 30000, memory limit 100663296",
		"Updated the pod's resources: cpu shares 204, cpu quota 20000, memory limit 100663296",
	}
	var got []string
	for _, s := range res.Steps {
		if s.Action == syncer.ActionUpdatePodSandboxResources {
			got = append(got, s.Message)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("pod-level updates %q, want %q", got, want)
	}
}

// TestResizeByRestartWithoutUpdatePodSandboxResources: on a runtime
// without the call (containerd 1.6) a resize that restarts still
// restarts the container with its new resources.
func TestResizeByRestartWithoutUpdatePodSandboxResources(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "100m", "memory", "64Mi"), limits("cpu", "100m", "memory", "64Mi"))
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	sb := h.Sync(pod).SandboxID
	pod.Spec.Containers[0].Resources = limits("cpu", "100m", "memory", "128Mi")
	h.RT.InjectError("UpdatePodSandboxResources", status.Error(codes.Unimplemented, "unknown method UpdatePodSandboxResources"))
	res := h.Sync(pod)
	syncertest.WantSteps(t, res,
		"KillContainer app ResizeRequiresRestart",
		"ConfigPodSandbox #0",
		"UpdatePodSandboxResources "+sb+" ResizePodInPlace",
		"StartContainer app ResizeRequiresRestart",
	)
	if s := res.Steps[2]; s.Message != "The runtime does not implement UpdatePodSandboxResources; skipped" {
		t.Errorf("pod-level step message %q, want it skipped", s.Message)
	}
	if res.Err() != nil {
		t.Errorf("pass failed: %v", res.Err())
	}
	if lr := runtimeResources(t, h, syncertest.Newest(t, res, "app").ID); lr.GetMemoryLimitInBytes() != 128<<20 {
		t.Errorf("memory limit %d, want 128Mi", lr.GetMemoryLimitInBytes())
	}
}

// TestResizeByRestartPodLevelFailureStillStarts: the runtime refusing
// the pod's new resources is a ResizePodInPlaceError step; the container
// starts all the same and the next pass does not ask again, as the
// kubelet's SyncPod goes on to its starts and its next sync finds the
// container started.
func TestResizeByRestartPodLevelFailureStillStarts(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "100m", "memory", "64Mi"), limits("cpu", "100m", "memory", "64Mi"))
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	sb := h.Sync(pod).SandboxID
	pod.Spec.Containers[0].Resources = limits("cpu", "100m", "memory", "128Mi")
	h.RT.InjectError("UpdatePodSandboxResources", errors.New("nri: plugin refused"))
	res := h.Sync(pod)
	syncertest.WantSteps(t, res,
		"KillContainer app ResizeRequiresRestart",
		"ConfigPodSandbox #0",
		"UpdatePodSandboxResources "+sb+" !ResizePodInPlaceError",
		"StartContainer app ResizeRequiresRestart",
	)
	step := syncertest.FailedStep(t, res, syncer.ActionUpdatePodSandboxResources, sb)
	if want := `update resources of sandbox "` + sb + `": nri: plugin refused`; step.Message != want {
		t.Errorf("message %q, want %q", step.Message, want)
	}
	if again := h.Sync(pod); len(again.Steps) != 0 {
		t.Errorf("a pass after the restart did %v", syncertest.Summary(again.Steps))
	}
}

// TestRestartAfterAResizeUpdatesThePod: a container that exited and
// restarts with resources changed meanwhile changes the pod level first
// (the kubelet's startingResizedContainer); one that restarts with what
// it had does not.
func TestRestartAfterAResizeUpdatesThePod(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "100m", "memory", "64Mi"), limits("cpu", "100m", "memory", "64Mi"))
	res := h.Sync(pod)
	sb := res.SandboxID

	h.Exit(res, "app", 1)
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer app Exited")

	h.Exit(res, "app", 1)
	h.Clock.Step(time.Minute) // past the back-off
	pod.Spec.Containers[0].Resources = limits("cpu", "100m", "memory", "96Mi")
	res = h.Sync(pod)
	syncertest.WantSteps(t, res,
		"ConfigPodSandbox #0",
		"UpdatePodSandboxResources "+sb+" ResizePodInPlace",
		"StartContainer app Exited",
	)
	if s := res.Steps[1]; s.Message != "Updated the pod's resources: cpu shares 204, cpu quota 20000, memory limit 167772160" {
		t.Errorf("pod-level message %q, want 160Mi of memory", s.Message)
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
	sb := h.Sync(pod).SandboxID
	pod.Spec.Containers[0].Resources = limits("cpu", "100m", "memory", "128Mi")
	h.RT.InjectError("UpdatePodSandboxResources", status.Error(codes.Unimplemented, "unknown method UpdatePodSandboxResources"))
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "UpdatePodSandboxResources "+sb+" ResizePodInPlace", "UpdateContainerResources app ResizePodInPlace")
	if s := res.Steps[0]; s.Message != "The runtime does not implement UpdatePodSandboxResources; skipped" {
		t.Errorf("pod-level step message %q, want it skipped", s.Message)
	}
	if res.Err() != nil {
		t.Errorf("pass failed: %v", res.Err())
	}
	if lr := runtimeResources(t, h, syncertest.Newest(t, res, "app").ID); lr.GetMemoryLimitInBytes() != 128<<20 {
		t.Errorf("memory limit %d, want 128Mi", lr.GetMemoryLimitInBytes())
	}
}

// TestResizeNotAdmittedChangesNothing: a resize the node does not admit
// changes nothing, is Deferred with the node's message, and a container
// that restarts meanwhile gets the resources it had (the kubelet's
// allocated pod); admitted later, it is applied in place.
func TestResizeNotAdmittedChangesNothing(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "100m", "memory", "64Mi"), limits("cpu", "100m", "memory", "64Mi"))
	h.Sync(pod)
	msg := "Node didn't have enough resource: memory, requested: 268435456, used: 0, capacity: 200000000"
	admit := false
	var asked int
	h.In.AdmitResize = func(p *corev1.Pod) (bool, string) {
		asked++
		if got := p.Spec.Containers[0].Resources.Limits.Memory().String(); got != "192Mi" {
			t.Errorf("admission asked for memory %s, want the desired 192Mi", got)
		}
		return admit, msg
	}

	pod.Spec.Containers[0].Resources = limits("cpu", "100m", "memory", "192Mi")
	h.Calls()
	res := h.Sync(pod)
	syncertest.WantSteps(t, res)
	if p := res.Plan.ResizePending; p == nil || p.Reason != corev1.PodReasonDeferred || p.Message != msg || asked != 1 {
		t.Errorf("pending %+v after %d admissions, want Deferred with the node's message", p, asked)
	}
	if calls := callsOf(h.Calls()); len(calls) != 0 {
		t.Errorf("resize calls %v for a resize not admitted", calls)
	}

	// A crash meanwhile restarts app with what it had.
	h.Exit(res, "app", 1)
	res = h.Sync(pod)
	restarted := syncertest.Newest(t, res, "app")
	if restarted.RestartCount != 1 {
		t.Fatalf("app restart count %d, want 1", restarted.RestartCount)
	}
	if lr := runtimeResources(t, h, restarted.ID); lr.GetMemoryLimitInBytes() != 64<<20 {
		t.Errorf("restarted with memory limit %d, want the allocated 64Mi", lr.GetMemoryLimitInBytes())
	}

	admit = true
	res = h.Sync(pod)
	if res.Plan.ResizePending != nil || len(res.Plan.Resize) != 1 {
		t.Errorf("admitted: pending %+v, resizes %+v; want one resize", res.Plan.ResizePending, res.Plan.Resize)
	}
	if lr := runtimeResources(t, h, syncertest.Newest(t, res, "app").ID); lr.GetMemoryLimitInBytes() != 192<<20 {
		t.Errorf("memory limit %d after admission, want 192Mi", lr.GetMemoryLimitInBytes())
	}
	if syncertest.Newest(t, res, "app").ID != restarted.ID {
		t.Error("the admitted resize restarted app")
	}
}

// TestResizeRunsAfterTheSandboxConfigAndBeforeStarts: in a pass that also
// starts a container, the resize is the kubelet's step 6: after
// ConfigPodSandbox (step 5), before the starts.
func TestResizeRunsAfterTheSandboxConfigAndBeforeStarts(t *testing.T) {
	h := syncertest.New(t)
	pod := resizePod(limits("cpu", "100m", "memory", "64Mi"), limits("cpu", "100m", "memory", "64Mi"))
	pod.Spec.Containers[1].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	sb := h.Sync(pod).SandboxID
	pod.Spec.Containers[0].Resources = limits("cpu", "100m", "memory", "32Mi")
	pod.Spec.Containers[1].Resources = limits("cpu", "100m", "memory", "128Mi")
	res := h.Sync(pod)
	// The pod grows from 128Mi (what both ran with) to 160Mi: the pod
	// level first, then app shrinks in place, then helper starts.
	syncertest.WantSteps(t, res,
		"KillContainer helper ResizeRequiresRestart",
		"ConfigPodSandbox #0",
		"UpdatePodSandboxResources "+sb+" ResizePodInPlace",
		"UpdateContainerResources app ResizePodInPlace",
		"StartContainer helper ResizeRequiresRestart",
	)
	if s := res.Steps[2]; s.Message != "Updated the pod's resources: cpu shares 204, cpu quota 20000, memory limit 167772160" {
		t.Errorf("pod-level message %q, want 160Mi of memory", s.Message)
	}
}
