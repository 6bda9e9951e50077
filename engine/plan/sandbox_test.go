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

// TestPodSandboxChangedCarriesThePreviousSandbox: the kubelet's
// PodSandboxChanged carries the newest sandbox's id when it replaces it,
// but none for a network namespace change (nor without a sandbox), and
// its missing-IP rule applies only to a sandbox with a network status.
func TestPodSandboxChangedCarriesThePreviousSandbox(t *testing.T) {
	tests := []struct {
		name       string
		mutatePod  func(*corev1.Pod)
		mutateView func(*model.RuntimeView)
		want       plan.SandboxDecision
	}{
		{
			name:       "no sandbox carries none",
			mutateView: func(v *model.RuntimeView) { v.Sandboxes = nil },
			want:       plan.SandboxDecision{Create: true, Reason: plan.SandboxReasonNone},
		},
		{
			name:       "a sandbox not ready is carried",
			mutateView: func(v *model.RuntimeView) { v.Sandboxes[0].State = model.SandboxNotReady },
			want:       plan.SandboxDecision{Create: true, Attempt: 1, PreviousID: "sb1", Reason: plan.SandboxReasonNotReady},
		},
		{
			name: "multiple ready sandboxes carry the newest",
			mutateView: func(v *model.RuntimeView) {
				v.Sandboxes = append(v.Sandboxes, plantest.Sandbox("sb0", 0, true, 2*time.Hour))
				v.Sandboxes[0].Attempt = 1
			},
			want: plan.SandboxDecision{Create: true, Attempt: 2, PreviousID: "sb1", Reason: plan.SandboxReasonMultipleReady},
		},
		{
			name:      "a network namespace change carries none",
			mutatePod: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			want:      plan.SandboxDecision{Create: true, Attempt: 1, Reason: plan.SandboxReasonNetworkChanged},
		},
		{
			name:       "a network status without an IP is carried",
			mutateView: func(v *model.RuntimeView) { v.Sandboxes[0].IPs = []string{} },
			want:       plan.SandboxDecision{Create: true, Attempt: 1, PreviousID: "sb1", Reason: plan.SandboxReasonNoIP},
		},
		{
			name:       "a ready sandbox without a network status is kept",
			mutateView: func(v *model.RuntimeView) { v.Sandboxes[0].IPs = nil },
			want:       plan.SandboxDecision{ID: "sb1", Reason: plan.SandboxReasonReady},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := plantest.BasePod()
			if tt.mutatePod != nil {
				tt.mutatePod(pod)
			}
			view := plantest.BaseView()
			if tt.mutateView != nil {
				tt.mutateView(&view)
			}
			got := plan.PodSandboxChanged(pod, &view)
			got.Message = ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PodSandboxChanged (-want +got):\n%s", diff)
			}
		})
	}
}
