//go:build integration

package daemon_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

func withMemory(c corev1.Container, mem string) corev1.Container {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse(mem)}
	c.Resources = corev1.ResourceRequirements{Requests: l.DeepCopy(), Limits: l}
	return c
}

// TestResizeThroughTheAPI: a pod with a resizePolicy goes through the API;
// PlanPod shows a raised memory limit as a resize, SyncPod applies it in
// place — the container's cgroup has the new limit, its ID and restart
// count are unchanged — and the status reports the new resources.
func TestResizeThroughTheAPI(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	app := withMemory(sleeper("app"), "64Mi")
	app.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.NotRequired}}
	pod := newCorePod(t, "", app)
	before := d.syncPod(ctx, t, pod).GetStatus().GetContainerStatuses()[0]

	pod.Spec.Containers[0] = withMemory(pod.Spec.Containers[0], "128Mi")
	plan, err := d.client().PlanPod(ctx, &podsyncv1.PlanPodRequest{Pod: podToProto(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	if rs := plan.GetPlan().GetContainersToResize(); len(rs) != 1 || rs[0].GetDesired().GetLimits()["memory"] != "128Mi" ||
		len(plan.GetPlan().GetContainersToKill()) != 0 {
		t.Fatalf("plan %v: want app resized to 128Mi, nothing killed", plan.GetPlan())
	}

	after := d.syncPod(ctx, t, pod).GetStatus().GetContainerStatuses()[0]
	if after.GetContainerId() != before.GetContainerId() || after.GetRestartCount() != 0 {
		t.Errorf("container %s restarts %d, want %s unrestarted", after.GetContainerId(), after.GetRestartCount(), before.GetContainerId())
	}
	if after.GetResources().GetLimits()["memory"] != "128Mi" || after.GetAllocatedResources()["memory"] != "128Mi" {
		t.Errorf("status resources %v allocated %v, want 128Mi", after.GetResources(), after.GetAllocatedResources())
	}
	id := strings.TrimPrefix(after.GetContainerId(), "containerd://")
	out, stderr, err := runtimeClient(t).ExecSync(ctx, id, []string{"/bin/sh", "-c",
		"cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max"}, 30*time.Second)
	if err != nil {
		t.Fatalf("exec: %v (%s)", err, stderr)
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err != nil || n != 128<<20 {
		t.Errorf("the container's cgroup memory limit %q, want %d", out, 128<<20)
	}
	if _, err := d.client().DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: pod.Namespace, Name: pod.Name}); err != nil {
		t.Fatal(err)
	}
	if err := removePodCgroups(string(pod.UID)); err != nil {
		t.Error(err)
	}
}
