package plan_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/plan/plantest"
)

// TestOOMKilledInitContainerCountsAsFailed: the kubelet's
// isInitContainerFailed takes an init container the kernel killed for
// memory as failed even when it exited 0: retried under Always and
// OnFailure, the pod killed under Never.
func TestOOMKilledInitContainerCountsAsFailed(t *testing.T) {
	oom := func(p *corev1.Pod, v *model.RuntimeView) {
		inst := plantest.Exited(plantest.Inst(p, "init-a", "c-a", model.ContainerExited, 0, time.Hour), 0, time.Minute)
		inst.Reason = plan.ReasonOOMKilled
		v.Containers = []model.ContainerInstance{inst}
	}
	tests := []struct {
		name   string
		policy corev1.RestartPolicy
		want   planSummary
	}{
		{
			name:   "Always retries it",
			policy: corev1.RestartPolicyAlways,
			want:   planSummary{Sandbox: "use:sb1", StartInit: []string{"init-a#1:InitContainerFailed"}},
		},
		{
			name:   "OnFailure retries it",
			policy: corev1.RestartPolicyOnFailure,
			want:   planSummary{Sandbox: "use:sb1", StartInit: []string{"init-a#1:InitContainerFailed"}},
		},
		{
			name:   "Never kills the pod",
			policy: corev1.RestartPolicyNever,
			want:   planSummary{KillPod: plan.KillReasonInitContainerFailed, Sandbox: "use:sb1", KillIDs: []string{"sb1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := plantest.BasePod()
			plantest.Chain(plantest.WithInit("init-a", "init-b"), plantest.Policy(tt.policy))(pod)
			view := plantest.BaseView()
			oom(pod, &view)
			got := plan.ComputePodActions(pod, view, model.ProbeResults{}, plantest.T0, plan.BackoffPolicy{})
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("ComputePodActions() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPruneInitContainersBeforeStart: as the kubelet's
// pruneInitContainersBeforeStart, only the newest exited or unknown
// instance of each init container is kept; running and created ones are
// never removed. Instances are an hour or more old and ran for half of
// that, so no crash-loop run holds them, except where a case says so.
func TestPruneInitContainersBeforeStart(t *testing.T) {
	inst := func(p *corev1.Pod, name, id string, state model.ContainerState, restarts int32, age time.Duration) model.ContainerInstance {
		return plantest.Inst(p, name, id, state, restarts, age)
	}
	tests := []struct {
		name       string
		mutatePod  func(*corev1.Pod)
		mutateView func(*corev1.Pod, *model.RuntimeView)
		want       []string
	}{
		{
			// Upstream's TestPruneInitContainers
			// (pkg/kubelet/kuberuntime/kuberuntime_manager_test.go).
			name:      "the newest exited or unknown instance of each init container is kept",
			mutatePod: plantest.WithInit("init1", "init2"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers,
					inst(p, "init1", "i1-3", model.ContainerExited, 3, 3*time.Hour),
					inst(p, "init1", "i1-2", model.ContainerExited, 2, 4*time.Hour),
					inst(p, "init2", "i2-1", model.ContainerExited, 1, 4*time.Hour),
					inst(p, "init1", "i1-1", model.ContainerUnknown, 1, 5*time.Hour),
					inst(p, "init2", "i2-0", model.ContainerExited, 0, 6*time.Hour),
					inst(p, "init1", "i1-0", model.ContainerExited, 0, 6*time.Hour),
				)
			},
			want: []string{"init1/i1-2", "init1/i1-1", "init1/i1-0", "init2/i2-0"},
		},
		{
			name:      "an unknown newest instance is the one kept",
			mutatePod: plantest.WithInit("init1"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers,
					inst(p, "init1", "i1-2", model.ContainerUnknown, 2, time.Hour),
					inst(p, "init1", "i1-1", model.ContainerExited, 1, 2*time.Hour),
					inst(p, "init1", "i1-0", model.ContainerExited, 0, 3*time.Hour))
			},
			// i1-1 is kept too: the newest exited instance, which the
			// crash-loop back-off reads (see the last cases).
			want: []string{"init1/i1-0"},
		},
		{
			name:      "running and created instances are never removed",
			mutatePod: plantest.WithInit("log-sidecar", "init2"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers,
					inst(p, "log-sidecar", "s-3", model.ContainerRunning, 3, time.Hour),
					inst(p, "log-sidecar", "s-2", model.ContainerCreated, 2, 2*time.Hour),
					inst(p, "log-sidecar", "s-1", model.ContainerExited, 1, 3*time.Hour),
					inst(p, "log-sidecar", "s-0", model.ContainerExited, 0, 4*time.Hour),
					inst(p, "init2", "i2-0", model.ContainerExited, 0, 5*time.Hour))
			},
			want: []string{"log-sidecar/s-0"},
		},
		{
			name:      "instances of regular containers are not init containers'",
			mutatePod: plantest.WithInit("init1"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = append(v.Containers,
					plantest.Exited(inst(p, "app", "app-0", model.ContainerExited, 0, 3*time.Hour), 0, 2*time.Hour),
					plantest.Exited(inst(p, "app", "app-00", model.ContainerExited, 0, 4*time.Hour), 0, 3*time.Hour),
					inst(p, "init1", "i1-0", model.ContainerExited, 0, 5*time.Hour))
			},
		},
		{
			// NOTE(podsync): a difference kept on purpose (README):
			// the run's first instance carries the restart count the
			// crash-loop back-off is counted from.
			name:      "the first instance of a crash-loop run is kept for the back-off",
			mutatePod: plantest.WithInit("init1"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Containers = []model.ContainerInstance{
					plantest.Exited(inst(p, "init1", "i1-3", model.ContainerExited, 3, 10*time.Second), 1, 5*time.Second),
					plantest.Exited(inst(p, "init1", "i1-2", model.ContainerExited, 2, 40*time.Second), 1, 35*time.Second),
					plantest.Exited(inst(p, "init1", "i1-1", model.ContainerExited, 1, time.Minute), 1, 55*time.Second),
					plantest.Exited(inst(p, "init1", "i1-0", model.ContainerExited, 0, 2*time.Hour), 0, time.Hour),
				}
			},
			want: []string{"init1/i1-2", "init1/i1-1"},
		},
		{
			name:      "a new sandbox removes every init instance instead",
			mutatePod: plantest.WithInit("init1"),
			mutateView: func(p *corev1.Pod, v *model.RuntimeView) {
				v.Sandboxes[0].State = model.SandboxNotReady
				v.Containers = []model.ContainerInstance{
					inst(p, "init1", "i1-1", model.ContainerExited, 1, 2*time.Hour),
					inst(p, "init1", "i1-0", model.ContainerExited, 0, 3*time.Hour),
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := plantest.BasePod()
			tt.mutatePod(pod)
			view := plantest.BaseView()
			tt.mutateView(pod, &view)
			got := plan.ComputePodActions(pod, view, model.ProbeResults{}, plantest.T0, plan.BackoffPolicy{})
			if diff := cmp.Diff(tt.want, summarize(got).PruneInit); diff != "" {
				t.Errorf("PruneInit (-want +got):\n%s", diff)
			}
			for _, a := range got.PruneInit {
				if a.Reason != plan.ReasonInitContainerPruned || a.ContainerID == "" {
					t.Errorf("prune %+v lacks its reason or container ID", a)
				}
			}
		})
	}
}
