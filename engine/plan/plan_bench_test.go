package plan_test

import (
	"fmt"
	"testing"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/plan/plantest"
)

// BenchmarkComputePodActions plans pods of 1, 10 and 50 containers in
// three states: all running (nothing to do), every fifth container exited
// for the first time (restart at once; with 1 container, that one), and a
// new pod (create the sandbox, start every container).
func BenchmarkComputePodActions(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		pod := plantest.BenchPod(n)
		states := []struct {
			name string
			view model.RuntimeView
			want func(plan.PodActions) error
		}{
			{"running", plantest.BenchView(pod, func(int) bool { return false }), func(a plan.PodActions) error {
				if a.KillPod || len(a.Start) != 0 || len(a.Kill) != 0 {
					return fmt.Errorf("plan for a running pod does something: %+v", a)
				}
				return nil
			}},
			{"exited", plantest.BenchView(pod, func(i int) bool { return i%5 == 0 }), func(a plan.PodActions) error {
				if want := (n + 4) / 5; len(a.Start) != want || len(a.BackOff) != 0 {
					return fmt.Errorf("plan restarts %d, backs off %d; want %d restarts", len(a.Start), len(a.BackOff), want)
				}
				return nil
			}},
			{"new", model.RuntimeView{}, func(a plan.PodActions) error {
				if !a.Sandbox.Create || len(a.Start) != n {
					return fmt.Errorf("plan for a new pod: create=%t, %d starts", a.Sandbox.Create, len(a.Start))
				}
				return nil
			}},
		}
		for _, st := range states {
			b.Run(fmt.Sprintf("containers=%d/%s", n, st.name), func(b *testing.B) {
				if err := st.want(plan.ComputePodActions(pod, st.view, model.ProbeResults{}, plantest.BenchNow, plan.BackoffPolicy{})); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					_ = plan.ComputePodActions(pod, st.view, model.ProbeResults{}, plantest.BenchNow, plan.BackoffPolicy{})
				}
			})
		}
	}
}
