package plan_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/plan/plantest"
)

func TestFindGarbage(t *testing.T) {
	pod := plantest.BasePod()
	app := &pod.Spec.Containers[0]
	hash := model.ContainerHash(pod, app)
	at := func(i int) time.Time { return plantest.T0.Add(time.Duration(i) * time.Minute) }
	mk := func(id string, state model.ContainerState, rc int32, sb string, age int) model.ContainerInstance {
		c := model.ContainerInstance{ID: id, Name: "app", State: state, RestartCount: rc, Hash: hash,
			CreatedAt: at(age), StartedAt: at(age), FinishedAt: at(age).Add(time.Second)}
		return c
	}
	for _, tc := range []struct {
		name       string
		containers []model.ContainerInstance
		sandboxes  []model.Sandbox
		sandboxOf  map[string]string
		want       []string
	}{
		{
			name: "crash loop keeps newest, last exited and the run's first",
			containers: []model.ContainerInstance{
				mk("c4", model.ContainerRunning, 4, "sb", 4), mk("c3", model.ContainerExited, 3, "sb", 3),
				mk("c2", model.ContainerExited, 2, "sb", 2), mk("c1", model.ContainerExited, 1, "sb", 1), mk("c0", model.ContainerExited, 0, "sb", 0),
			},
			want: []string{"c2", "c1"},
		},
		{
			name: "a long run resets the run",
			containers: []model.ContainerInstance{
				mk("c3", model.ContainerExited, 3, "sb", 30), mk("c2", model.ContainerExited, 2, "sb", 20),
				func() model.ContainerInstance {
					c := mk("c1", model.ContainerExited, 1, "sb", 10)
					c.FinishedAt = c.StartedAt.Add(time.Hour)
					return c
				}(),
				mk("c0", model.ContainerExited, 0, "sb", 0),
			},
			want: []string{"c0"},
		},
		{
			name: "created leftovers behind the newest go",
			containers: []model.ContainerInstance{
				mk("c2", model.ContainerRunning, 2, "sb", 2), mk("c1", model.ContainerCreated, 1, "sb", 1), mk("c0", model.ContainerExited, 0, "sb", 0),
			},
			want: []string{"c1"},
		},
		{
			name: "a changed spec ends the run",
			containers: []model.ContainerInstance{
				mk("c2", model.ContainerRunning, 2, "sb", 2),
				func() model.ContainerInstance {
					c := mk("c1", model.ContainerExited, 1, "sb", 1)
					c.Hash = "old"
					return c
				}(),
				func() model.ContainerInstance {
					c := mk("c0", model.ContainerExited, 0, "sb", 0)
					c.Hash = "old"
					return c
				}(),
			},
			want: []string{"c0"},
		},
		{
			name: "dead instances of containers no longer in the spec go",
			containers: []model.ContainerInstance{
				{ID: "x1", Name: "gone", State: model.ContainerExited}, {ID: "x0", Name: "gone", State: model.ContainerRunning},
			},
			want: []string{"x1"},
		},
		{
			name: "empty stopped sandboxes go, but not the newest",
			containers: []model.ContainerInstance{
				mk("c1", model.ContainerRunning, 1, "sb2", 5), mk("c0", model.ContainerExited, 0, "sb0", 0),
			},
			sandboxes: []model.Sandbox{{ID: "sb3", State: model.SandboxNotReady}, {ID: "sb2", State: model.SandboxNotReady}, {ID: "sb1", State: model.SandboxNotReady}, {ID: "sb0", State: model.SandboxNotReady}},
			sandboxOf: map[string]string{"c1": "sb2", "c0": "sb0"},
			want:      []string{"sb1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := model.RuntimeView{Containers: tc.containers, Sandboxes: tc.sandboxes}
			g := plan.FindGarbage(pod, &view, tc.sandboxOf, plan.BackoffPolicy{})
			var got []string
			for _, c := range g.Containers {
				got = append(got, c.ID)
			}
			for _, s := range g.Sandboxes {
				got = append(got, s.ID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("garbage (-want +got):\n%s", diff)
			}
		})
	}
}
