//go:build integration

package engine_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri"
)

func memoryLimited(limit string) corev1.ResourceRequirements {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse(limit)}
	return corev1.ResourceRequirements{Requests: l.DeepCopy(), Limits: l}
}

// cgroupMemoryLimit reads the memory limit of the container's own cgroup
// from inside it: memory.limit_in_bytes on cgroup v1, memory.max on v2.
func (e *env) cgroupMemoryLimit(id string) int64 {
	e.t.Helper()
	out, stderr, err := e.rt.ExecSync(e.ctx, id, []string{"/bin/sh", "-c",
		"cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max"}, 10*time.Second)
	if err != nil {
		e.t.Fatalf("read the cgroup's memory limit: %v (%s)", err, stderr)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		e.t.Fatalf("memory limit %q: %v", out, err)
	}
	return n
}

// TestResizeMemoryLimitInPlace: a memory limit raised on a running pod's
// container with resizePolicy NotRequired (the default) changes the
// container's cgroup without a restart.
func TestResizeMemoryLimitInPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	pod.Spec.Containers[0].Resources = memoryLimited("64Mi")
	res := e.until(pod, "running", e.running(pod))
	before := newest(t, res, "app")
	if got := e.cgroupMemoryLimit(before.ID); got != 64<<20 {
		t.Fatalf("memory limit before the resize %d, want 64Mi", got)
	}

	pod.Spec.Containers[0].Resources = memoryLimited("128Mi")
	res = e.sync(pod)
	if !hasStep(res, syncer.ActionUpdateContainerResources, "app", syncer.ReasonResize) || hasStep(res, syncer.ActionKillContainer, "app", plan.ReasonDefinitionChanged) {
		t.Fatalf("resize pass steps %v, want UpdateContainerResources and no kill", steps(res.Steps))
	}
	after := newest(t, res, "app")
	if after.ID != before.ID || after.RestartCount != 0 || after.State != model.ContainerRunning {
		t.Errorf("app is %s (%s) with %d restarts, want %s still running, unrestarted", after.ID, after.State, after.RestartCount, before.ID)
	}
	if got := e.cgroupMemoryLimit(after.ID); got != 128<<20 {
		t.Errorf("memory limit after the resize %d, want 128Mi", got)
	}
	// The resize is done: the next pass does nothing.
	if again := e.sync(pod); len(again.Steps) != 0 {
		t.Errorf("a pass after the resize did %v", steps(again.Steps))
	}
	cs := e.status(pod, e.sync(pod)).ContainerStatuses[0]
	if cs.RestartCount != 0 || cs.ContainerID != "containerd://"+before.ID {
		t.Errorf("status restart count %d container %s, want 0 and %s", cs.RestartCount, cs.ContainerID, before.ID)
	}
}

// TestResizeRestartContainerPolicy: with resizePolicy RestartContainer
// for memory, the container restarts once, with the kubelet's message,
// and runs with the new limit; between the kill and the start the
// runtime is told the pod's new resources (UpdatePodSandboxResources),
// which containerd 1.6 does not implement: the step is skipped there.
func TestResizeRestartContainerPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	pod.Spec.Containers[0].Resources = memoryLimited("64Mi")
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	res := e.until(pod, "running", e.running(pod))
	before := newest(t, res, "app")

	pod.Spec.Containers[0].Resources = memoryLimited("128Mi")
	all := e.syncUntil(pod, "restarted", func(r syncer.SyncResult) bool {
		inst := r.View.FindContainer("app")
		return inst != nil && inst.ID != before.ID && inst.State == model.ContainerRunning
	})
	var kills, podLevel []syncer.StepResult
	for _, r := range all {
		var order []syncer.StepAction
		for _, s := range r.Steps {
			switch s.Action {
			case syncer.ActionKillContainer:
				kills = append(kills, s)
			case syncer.ActionUpdatePodSandboxResources:
				podLevel = append(podLevel, s)
			case syncer.ActionUpdateContainerResources:
				t.Errorf("RestartContainer resize called UpdateContainerResources")
			}
			if s.Action == syncer.ActionKillContainer || s.Action == syncer.ActionUpdatePodSandboxResources || s.Action == syncer.ActionStartContainer {
				order = append(order, s.Action)
			}
		}
		if len(order) > 0 && !slices.Equal(order, []syncer.StepAction{syncer.ActionKillContainer, syncer.ActionUpdatePodSandboxResources, syncer.ActionStartContainer}) {
			t.Errorf("pass steps %v: want the kill, the pod's resources, the start", steps(r.Steps))
		}
	}
	if len(kills) != 1 || kills[0].Message != "Container app resize requires restart" || kills[0].Reason != plan.ReasonResizeRestart {
		t.Errorf("kills %+v, want one with the kubelet's message", kills)
	}
	want := "Updated the pod's resources: cpu shares 102, cpu quota 10000, memory limit 134217728"
	if inst.Flavour() == localcri.Containerd16 {
		want = "The runtime does not implement UpdatePodSandboxResources; skipped"
	}
	if len(podLevel) != 1 || podLevel[0].Err != nil || podLevel[0].Message != want {
		t.Errorf("pod-level steps %+v, want one: %q", podLevel, want)
	}
	after := newest(t, all[len(all)-1], "app")
	if after.RestartCount != 1 {
		t.Errorf("restart count %d, want 1", after.RestartCount)
	}
	if got := e.cgroupMemoryLimit(after.ID); got != 128<<20 {
		t.Errorf("memory limit after the restart %d, want 128Mi", got)
	}
	if again := e.sync(pod); len(again.Steps) != 0 {
		t.Errorf("a pass after the restart did %v", steps(again.Steps))
	}
}
