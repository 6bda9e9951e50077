package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/plan"
)

var (
	_ engine.Runtime      = (*enginetest.FakeRuntime)(nil)
	_ engine.ImageService = (*enginetest.FakeRuntime)(nil)
)

// t0 is the fake clock's start.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// harness is one Syncer on a FakeRuntime with a fake clock.
type harness struct {
	t     *testing.T
	ctx   context.Context
	rt    *enginetest.FakeRuntime
	clock *clocktesting.FakeClock
	s     *engine.Syncer
	cfg   criconfig.Options
	in    engine.SyncInput
}

func newHarness(t *testing.T, mutate ...func(*engine.SyncerOptions)) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	clk := clocktesting.NewFakeClock(t0)
	rt := enginetest.NewRuntime(enginetest.WithClock(clk), enginetest.WithImages(enginetest.Image))
	cfg := criconfig.Options{RootDir: t.TempDir(), PodLogDir: t.TempDir(), CgroupFS: t.TempDir(), NodeIPs: []string{"192.0.2.10"}}
	opts := engine.SyncerOptions{Runtime: rt, Images: rt, Clock: clk, Logger: zaptest.NewLogger(t), Config: cfg}
	for _, m := range mutate {
		m(&opts)
	}
	s, err := engine.NewSyncer(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, ctx: ctx, rt: rt, clock: clk, s: s, cfg: opts.Config}
}

// sync runs one pass (after moving the clock on by a millisecond, so that
// objects of different passes are ordered), checks that the emitted steps
// are the result's, and fails the test on a pass error.
func (h *harness) sync(pod *corev1.Pod) engine.SyncResult {
	h.t.Helper()
	res, err := h.trySync(pod)
	if err != nil {
		h.t.Fatalf("SyncPod: %v", err)
	}
	return res
}

func (h *harness) trySync(pod *corev1.Pod) (engine.SyncResult, error) {
	h.t.Helper()
	h.clock.Step(time.Millisecond)
	var emitted []engine.StepResult
	res, err := h.s.SyncPod(h.ctx, pod, h.in, func(st engine.StepResult) { emitted = append(emitted, st) })
	if diff := cmp.Diff(summary(res.Steps), summary(emitted)); diff != "" {
		h.t.Errorf("emitted steps differ from the result's (-result +emitted):\n%s", diff)
	}
	return res, err
}

// summary renders steps as "Action Target Reason", with "!" before the
// reason of a failed step and "@+duration" for a back-off's next retry.
func summary(steps []engine.StepResult) []string {
	var out []string
	for _, s := range steps {
		line := fmt.Sprintf("%s %s", s.Action, s.Target)
		if s.Action == engine.ActionCreatePodSandbox || s.Action == engine.ActionKillPodSandbox ||
			s.Action == engine.ActionConfigPodSandbox || s.Action == engine.ActionRemovePodSandbox {
			line = fmt.Sprintf("%s #%d", s.Action, s.Attempt)
		}
		if s.Err != nil {
			line += " !" + s.Reason
		} else if s.Reason != "" {
			line += " " + s.Reason
		}
		out = append(out, line)
	}
	return out
}

func wantSteps(t *testing.T, res engine.SyncResult, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, summary(res.Steps)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

// failedStep returns the failed step with action on target, failing the
// test if there is none.
func failedStep(t *testing.T, res engine.SyncResult, action engine.StepAction, target string) engine.StepResult {
	t.Helper()
	for _, s := range res.Steps {
		if s.Action == action && s.Target == target && s.Err != nil {
			return s
		}
	}
	t.Fatalf("no failed %s step for %s in %v", action, target, summary(res.Steps))
	return engine.StepResult{}
}

// newest returns the newest instance of the named container.
func newest(t *testing.T, res engine.SyncResult, name string) plan.ContainerInstance {
	t.Helper()
	inst := res.View.FindContainer(name)
	if inst == nil {
		t.Fatalf("no instance of %s in %v", name, res.View.Containers)
	}
	return *inst
}

// exit makes the newest instance of the named container exit.
func (h *harness) exit(res engine.SyncResult, name string, code int32, lines ...string) {
	h.t.Helper()
	inst := newest(h.t, res, name)
	if err := h.rt.ExitContainer(inst.ID, code, lines...); err != nil {
		h.t.Fatal(err)
	}
}

// converged checks that the pod runs: every regular container running in
// the ready sandbox, phase Running, and no dead instance but the newest
// two of each container.
func (h *harness) converged(pod *corev1.Pod, res engine.SyncResult) {
	h.t.Helper()
	if len(res.View.Sandboxes) == 0 || res.View.Sandboxes[0].State != plan.SandboxReady {
		h.t.Fatalf("no ready sandbox: %+v", res.View.Sandboxes)
	}
	for _, c := range pod.Spec.Containers {
		if inst := res.View.FindContainer(c.Name); inst == nil || inst.State != plan.ContainerRunning {
			h.t.Errorf("container %s not running: %+v", c.Name, inst)
		}
	}
	for _, inst := range res.View.Containers {
		if inst.State == plan.ContainerCreated {
			h.t.Errorf("created instance %s left behind", inst.String())
		}
	}
	if st := h.s.PodStatus(pod, res.View, plan.ProbeResults{}); st.Phase != corev1.PodRunning {
		h.t.Errorf("phase = %s, want Running", st.Phase)
	}
	// Another pass has nothing to do.
	if again := h.sync(pod); len(again.Steps) != 0 {
		h.t.Errorf("a pass after convergence did %v", summary(again.Steps))
	}
}

// criContainers lists the fake runtime's containers of the pod, by name
// and state.
func (h *harness) criContainers() []string {
	h.t.Helper()
	cs, err := h.rt.ListContainers(h.ctx, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s/%d %s", c.GetMetadata().GetName(), c.GetMetadata().GetAttempt(), strings.TrimPrefix(c.GetState().String(), "CONTAINER_")))
	}
	slices.Sort(out)
	return out
}

func (h *harness) criSandboxes() []string {
	h.t.Helper()
	sbs, err := h.rt.ListPodSandbox(h.ctx, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, s := range sbs {
		out = append(out, fmt.Sprintf("%d %s", s.GetMetadata().GetAttempt(), strings.TrimPrefix(s.GetState().String(), "SANDBOX_")))
	}
	slices.Sort(out)
	return out
}

// calls returns the CRI calls made so far, and forgets them.
func (h *harness) calls() []string {
	h.rt.Lock()
	defer h.rt.Unlock()
	out := slices.Clone(h.rt.Called)
	h.rt.Called = nil
	h.rt.Images.Lock()
	out = append(out, h.rt.Images.Called...)
	h.rt.Images.Called = nil
	h.rt.Images.Unlock()
	return out
}
