package podstatus

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/plan/plantest"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// resizeFixture is BasePod whose app runs with created (as the runtime
// reports reported) while the spec asks for desired.
func resizeFixture(created, desired corev1.ResourceRequirements, reported *model.RuntimeResources) (*corev1.Pod, model.RuntimeView) {
	old := plantest.BasePod()
	old.Spec.Containers[0].Resources = created
	pod := plantest.BasePod()
	pod.Spec.Containers[0].Resources = desired
	view := plantest.BaseView()
	app := plantest.Inst(old, "app", "c-app", model.ContainerRunning, 0, 55*time.Minute)
	app.Resources = reported
	view.Containers[1] = app
	return pod, view
}

func resizeCondition(st corev1.PodStatus) []string {
	var out []string
	for _, c := range st.Conditions {
		if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
			out = append(out, string(c.Type)+"="+string(c.Status)+"("+c.Reason+"): "+c.Message)
		}
	}
	return out
}

func quantities(l corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for k, q := range l {
		out[string(k)] = q.String()
	}
	return out
}

// TestResizeConditions: the kubelet's PodResizePending and
// PodResizeInProgress conditions with their reasons.
func TestResizeConditions(t *testing.T) {
	created := corev1.ResourceRequirements{Requests: rl("memory", "64Mi"), Limits: rl("memory", "64Mi")}
	desired := corev1.ResourceRequirements{Requests: rl("memory", "64Mi"), Limits: rl("memory", "128Mi")}
	msg := "Node didn't have enough resource: memory, requested: 201326592, used: 0, capacity: 100000000"
	for _, tt := range []struct {
		name     string
		desired  corev1.ResourceRequirements
		reported *model.RuntimeResources
		opts     StatusOptions
		want     []string
	}{
		{name: "no resize has no resize condition", desired: created},
		{name: "a resize applied has no resize condition", desired: desired,
			reported: &model.RuntimeResources{CPUShares: 2, MemoryLimitInBytes: 128 << 20}},
		{name: "a resize not admitted is pending with the kubelet's reason and message", desired: desired,
			opts: StatusOptions{ResizePending: &plan.ResizePending{Reason: corev1.PodReasonDeferred, Message: msg}},
			want: []string{"PodResizePending=True(Deferred): " + msg}},
		{name: "an admitted resize not yet applied is in progress", desired: desired,
			want: []string{"PodResizeInProgress=True(): "}},
		{name: "a failed resize is in progress with reason Error", desired: desired,
			opts: StatusOptions{ResizeError: `update memory of container "app": boom`},
			want: []string{`PodResizeInProgress=True(Error): update memory of container "app": boom`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod, view := resizeFixture(created, tt.desired, tt.reported)
			st := ComputePodStatus(pod, view, model.ProbeResults{}, plantest.T0, tt.opts)
			if diff := cmp.Diff(tt.want, resizeCondition(st)); diff != "" {
				t.Errorf("resize conditions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestContainerResourcesAsTheKubeletReportsThem: resources are what the
// runtime runs (CPU request from the shares, CPU limit from the quota,
// memory limit), allocatedResources the allocated requests: the spec's,
// or while a resize is pending, the running ones.
func TestContainerResourcesAsTheKubeletReportsThem(t *testing.T) {
	created := corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi"), Limits: rl("cpu", "200m", "memory", "64Mi")}
	desired := corev1.ResourceRequirements{Requests: rl("cpu", "300m", "memory", "64Mi"), Limits: rl("cpu", "400m", "memory", "128Mi")}
	running := &model.RuntimeResources{CPUShares: 102, CPUQuota: 20000, CPUPeriod: 100000, MemoryLimitInBytes: 64 << 20}
	type res struct{ Requests, Limits, Allocated map[string]string }
	for _, tt := range []struct {
		name     string
		reported *model.RuntimeResources
		opts     StatusOptions
		want     res
	}{
		{name: "an admitted resize not yet applied shows the runtime's values and the new allocation", reported: running,
			want: res{Requests: map[string]string{"cpu": "100m", "memory": "64Mi"}, Limits: map[string]string{"cpu": "200m", "memory": "64Mi"},
				Allocated: map[string]string{"cpu": "300m", "memory": "64Mi"}}},
		{name: "a pending resize keeps the allocation the container runs with", reported: running,
			opts: StatusOptions{ResizePending: &plan.ResizePending{Reason: corev1.PodReasonDeferred}},
			want: res{Requests: map[string]string{"cpu": "100m", "memory": "64Mi"}, Limits: map[string]string{"cpu": "200m", "memory": "64Mi"},
				Allocated: map[string]string{"cpu": "100m", "memory": "64Mi"}}},
		{name: "an applied resize shows the new values", reported: &model.RuntimeResources{CPUShares: 307, CPUQuota: 40000, CPUPeriod: 100000, MemoryLimitInBytes: 128 << 20},
			want: res{Requests: map[string]string{"cpu": "300m", "memory": "64Mi"}, Limits: map[string]string{"cpu": "400m", "memory": "128Mi"},
				Allocated: map[string]string{"cpu": "300m", "memory": "64Mi"}}},
		{name: "without runtime resources the allocated values are shown",
			want: res{Requests: map[string]string{"cpu": "300m", "memory": "64Mi"}, Limits: map[string]string{"cpu": "400m", "memory": "128Mi"},
				Allocated: map[string]string{"cpu": "300m", "memory": "64Mi"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod, view := resizeFixture(created, desired, tt.reported)
			st := ComputePodStatus(pod, view, model.ProbeResults{}, plantest.T0, tt.opts)
			cs := st.ContainerStatuses[0]
			if cs.Resources == nil {
				t.Fatal("no resources")
			}
			got := res{Requests: quantities(cs.Resources.Requests), Limits: quantities(cs.Resources.Limits), Allocated: quantities(cs.AllocatedResources)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCPUAtTheFloorsReportsTheAllocatedValue: a CPU request at or below 2m
// (the minimum shares) and a limit at or below 10m (the minimum quota)
// are reported as allocated when both sides are at the floor.
func TestCPUAtTheFloorsReportsTheAllocatedValue(t *testing.T) {
	r := corev1.ResourceRequirements{Requests: rl("cpu", "1m"), Limits: rl("cpu", "5m")}
	pod, view := resizeFixture(r, r, &model.RuntimeResources{CPUShares: 2, CPUQuota: 1000, CPUPeriod: 100000})
	st := ComputePodStatus(pod, view, model.ProbeResults{}, plantest.T0, StatusOptions{})
	cs := st.ContainerStatuses[0]
	if got := cs.Resources.Requests.Cpu().String(); got != "1m" {
		t.Errorf("CPU request %s, want the allocated 1m", got)
	}
	if got := cs.Resources.Limits.Cpu().String(); got != "5m" {
		t.Errorf("CPU limit %s, want the allocated 5m", got)
	}
}
