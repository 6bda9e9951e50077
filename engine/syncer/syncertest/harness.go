package syncertest

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

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/host/mounttable"
)

var (
	_ syncer.Runtime      = (*enginetest.FakeRuntime)(nil)
	_ syncer.ImageService = (*enginetest.FakeRuntime)(nil)
)

// T0 is the fake clock's start.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Harness is one Syncer on a FakeRuntime with a fake clock.
type Harness struct {
	T     *testing.T
	Ctx   context.Context
	RT    *enginetest.FakeRuntime
	Clock *clocktesting.FakeClock
	S     *syncer.Syncer
	Cfg   criconfig.Options
	In    syncer.SyncInput
}

// New returns a Harness on a fresh fake runtime and fake clock at T0;
// mutate adjusts the Syncer's options before it is built.
func New(t *testing.T, mutate ...func(*syncer.SyncerOptions)) *Harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	clk := clocktesting.NewFakeClock(T0)
	rt := enginetest.NewRuntime(enginetest.WithClock(clk), enginetest.WithImages(enginetest.Image))
	cfg := criconfig.Options{RootDir: t.TempDir(), PodLogDir: t.TempDir(), CgroupFS: t.TempDir(), NodeIPs: []string{"192.0.2.10"}}
	opts := syncer.SyncerOptions{Runtime: rt, Images: rt, Clock: clk, Logger: zaptest.NewLogger(t), Config: cfg}
	for _, m := range mutate {
		m(&opts)
	}
	if f, ok := opts.Runtime.(*enginetest.FakeRuntime); ok {
		// A mutation may give the syncer a fake of its own.
		rt = f
	}
	// Before the root directory is removed: the subPath and hostPath
	// bind mounts the passes made must not be removed through, nor the
	// pods' tmpfs volumes left mounted.
	t.Cleanup(func() {
		if err := mounttable.UnmountBelow(opts.Config.RootDir); err != nil {
			t.Errorf("unmount below the root directory: %v", err)
		}
	})
	s, err := syncer.NewSyncer(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &Harness{T: t, Ctx: ctx, RT: rt, Clock: clk, S: s, Cfg: opts.Config}
}

// Sync runs one pass (after moving the clock on by a millisecond, so that
// objects of different passes are ordered), checks that the emitted steps
// are the result's, and fails the test on a pass error.
func (h *Harness) Sync(pod *corev1.Pod) syncer.SyncResult {
	h.T.Helper()
	res, err := h.TrySync(pod)
	if err != nil {
		h.T.Fatalf("SyncPod: %v", err)
	}
	return res
}

// TrySync is Sync that returns the pass's error instead of failing.
func (h *Harness) TrySync(pod *corev1.Pod) (syncer.SyncResult, error) {
	h.T.Helper()
	h.Clock.Step(time.Millisecond)
	var emitted []syncer.StepResult
	res, err := h.S.SyncPod(h.Ctx, pod, h.In, func(st syncer.StepResult) { emitted = append(emitted, st) })
	// The next pass starts from this one's pull failures, as a pod
	// worker's does.
	h.In.PullFailures = res.PullFailures
	if diff := cmp.Diff(Summary(res.Steps), Summary(emitted)); diff != "" {
		h.T.Errorf("emitted steps differ from the result's (-result +emitted):\n%s", diff)
	}
	return res, err
}

// Summary renders steps as "Action Target Reason", with "!" before the
// reason of a failed step and "@+duration" for a back-off's next retry.
func Summary(steps []syncer.StepResult) []string {
	var out []string
	for _, s := range steps {
		line := fmt.Sprintf("%s %s", s.Action, s.Target)
		if s.Action == syncer.ActionCreatePodSandbox || s.Action == syncer.ActionKillPodSandbox ||
			s.Action == syncer.ActionConfigPodSandbox || s.Action == syncer.ActionRemovePodSandbox {
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

// WantSteps fails t unless res's steps are want (see Summary).
func WantSteps(t *testing.T, res syncer.SyncResult, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, Summary(res.Steps)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

// FailedStep returns the failed step with action on target, failing the
// test if there is none.
func FailedStep(t *testing.T, res syncer.SyncResult, action syncer.StepAction, target string) syncer.StepResult {
	t.Helper()
	for _, s := range res.Steps {
		if s.Action == action && s.Target == target && s.Err != nil {
			return s
		}
	}
	t.Fatalf("no failed %s step for %s in %v", action, target, Summary(res.Steps))
	return syncer.StepResult{}
}

// Newest returns the newest instance of the named container.
func Newest(t *testing.T, res syncer.SyncResult, name string) model.ContainerInstance {
	t.Helper()
	inst := res.View.FindContainer(name)
	if inst == nil {
		t.Fatalf("no instance of %s in %v", name, res.View.Containers)
	}
	return *inst
}

// Exit makes the newest instance of the named container exit.
func (h *Harness) Exit(res syncer.SyncResult, name string, code int32, lines ...string) {
	h.T.Helper()
	inst := Newest(h.T, res, name)
	if err := h.RT.ExitContainer(inst.ID, code, lines...); err != nil {
		h.T.Fatal(err)
	}
}

// Converged checks that the pod runs: every regular container running in
// the ready sandbox, phase Running, and no dead instance but the newest
// two of each container.
func (h *Harness) Converged(pod *corev1.Pod, res syncer.SyncResult) {
	h.T.Helper()
	if len(res.View.Sandboxes) == 0 || res.View.Sandboxes[0].State != model.SandboxReady {
		h.T.Fatalf("no ready sandbox: %+v", res.View.Sandboxes)
	}
	for _, c := range pod.Spec.Containers {
		if inst := res.View.FindContainer(c.Name); inst == nil || inst.State != model.ContainerRunning {
			h.T.Errorf("container %s not running: %+v", c.Name, inst)
		}
	}
	for _, inst := range res.View.Containers {
		if inst.State == model.ContainerCreated {
			h.T.Errorf("created instance %s left behind", inst.String())
		}
	}
	if st := h.S.PodStatus(pod, res.View, model.ProbeResults{}); st.Phase != corev1.PodRunning {
		h.T.Errorf("phase = %s, want Running", st.Phase)
	}
	// Another pass has nothing to do.
	if again := h.Sync(pod); len(again.Steps) != 0 {
		h.T.Errorf("a pass after convergence did %v", Summary(again.Steps))
	}
}

// CriContainers lists the fake runtime's containers of the pod, by name
// and state.
func (h *Harness) CriContainers() []string {
	h.T.Helper()
	cs, err := h.RT.ListContainers(h.Ctx, nil)
	if err != nil {
		h.T.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s/%d %s", c.GetMetadata().GetName(), c.GetMetadata().GetAttempt(), strings.TrimPrefix(c.GetState().String(), "CONTAINER_")))
	}
	slices.Sort(out)
	return out
}

// CriSandboxes lists the runtime's sandboxes as "attempt state", sorted.
func (h *Harness) CriSandboxes() []string {
	h.T.Helper()
	sbs, err := h.RT.ListPodSandbox(h.Ctx, nil)
	if err != nil {
		h.T.Fatal(err)
	}
	var out []string
	for _, s := range sbs {
		out = append(out, fmt.Sprintf("%d %s", s.GetMetadata().GetAttempt(), strings.TrimPrefix(s.GetState().String(), "SANDBOX_")))
	}
	slices.Sort(out)
	return out
}

// Calls returns the CRI calls made so far, and forgets them.
func (h *Harness) Calls() []string {
	h.RT.Lock()
	defer h.RT.Unlock()
	out := slices.Clone(h.RT.Called)
	h.RT.Called = nil
	h.RT.Images.Lock()
	out = append(out, h.RT.Images.Called...)
	h.RT.Images.Called = nil
	h.RT.Images.Unlock()
	return out
}
