//go:build integration

package engine_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
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
// and runs with the new limit.
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
	var kills []syncer.StepResult
	for _, r := range all {
		for _, s := range r.Steps {
			if s.Action == syncer.ActionKillContainer {
				kills = append(kills, s)
			}
			if s.Action == syncer.ActionUpdateContainerResources {
				t.Errorf("RestartContainer resize called UpdateContainerResources")
			}
		}
	}
	if len(kills) != 1 || kills[0].Message != "Container app resize requires restart" || kills[0].Reason != plan.ReasonResizeRestart {
		t.Errorf("kills %+v, want one with the kubelet's message", kills)
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
