package syncer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// cancellingRuntime cancels the pass's context with cause while
// RunPodSandbox runs, and fails the create as a runtime does when its
// caller goes away.
type cancellingRuntime struct {
	*enginetest.FakeRuntime
	cancel context.CancelCauseFunc
	cause  error
}

func (r *cancellingRuntime) RunPodSandbox(ctx context.Context, _ *runtimeapi.PodSandboxConfig, _ string) (string, error) {
	r.cancel(r.cause)
	<-ctx.Done()
	return "", fmt.Errorf("rpc error: code = Canceled desc = %w", ctx.Err())
}

// TestStepStreamAsTheKubeletsSyncResult: the steps of a pass are the
// kubelet's SyncPod results (kuberuntime_manager.go SyncPod,
// killPodWithSyncResult; kuberuntime_sandbox.go createPodSandbox).
func TestStepStreamAsTheKubeletsSyncResult(t *testing.T) {
	t.Run("a pod kill stops every sandbox in one step whose target is the pod UID", func(t *testing.T) {
		h := syncertest.New(t)
		pod := enginetest.Pod()
		res := h.Sync(pod)
		// The sandbox stopped from outside is replaced: the pod has two.
		if err := h.RT.StopPodSandbox(h.Ctx, res.SandboxID); err != nil {
			t.Fatal(err)
		}
		h.Converged(pod, h.Sync(pod))
		if got := h.CriSandboxes(); len(got) != 2 {
			t.Fatalf("sandboxes %v, want the stopped one and its replacement", got)
		}
		h.Calls() // forgets the calls so far
		pod = pod.DeepCopy()
		pod.DeletionTimestamp = ptr.To(metav1.NewTime(syncertest.T0))
		res = h.Sync(pod)
		var kills []syncer.StepResult
		for _, s := range res.Steps {
			if s.Action == syncer.ActionKillPodSandbox {
				kills = append(kills, s)
			}
		}
		if len(kills) != 1 {
			t.Fatalf("KillPodSandbox steps %v, want one", syncertest.Summary(kills))
		}
		if k := kills[0]; k.Target != string(pod.UID) || k.Attempt != 1 || k.Err != nil {
			t.Errorf("KillPodSandbox step %+v, want target %s, the newest attempt and no error", k, pod.UID)
		}
		if n := strings.Count(strings.Join(h.Calls(), " "), "StopPodSandbox"); n != 2 {
			t.Errorf("%d StopPodSandbox calls, want one per sandbox", n)
		}
		if got := h.CriSandboxes(); !slices.Equal(got, []string{"0 NOTREADY", "1 NOTREADY"}) {
			t.Errorf("sandboxes %v, want both stopped", got)
		}
	})

	t.Run("a failed stop of one sandbox fails the pod's one step", func(t *testing.T) {
		h := syncertest.New(t)
		pod := enginetest.Pod()
		h.Sync(pod)
		pod = pod.DeepCopy()
		pod.DeletionTimestamp = ptr.To(metav1.NewTime(syncertest.T0))
		h.RT.InjectError("StopPodSandbox", errors.New("busy"))
		res, err := h.TrySync(pod)
		if err != nil {
			t.Fatal(err)
		}
		st := syncertest.FailedStep(t, res, syncer.ActionKillPodSandbox, string(pod.UID))
		if st.Reason != syncer.ReasonKillPodSandboxError || st.Message != "busy" {
			t.Errorf("step reason %q message %q, want KillPodSandboxError and the runtime's error", st.Reason, st.Message)
		}
	})

	t.Run("a failed sandbox create carries the kubelet's message", func(t *testing.T) {
		h := syncertest.New(t)
		pod := enginetest.Pod()
		h.RT.InjectError("RunPodSandbox", errors.New("no network"))
		res, err := h.TrySync(pod)
		if err != nil {
			t.Fatal(err)
		}
		syncertest.WantSteps(t, res, "CreatePodSandbox #0 !CreatePodSandboxError")
		st := syncertest.FailedStep(t, res, syncer.ActionCreatePodSandbox, model.PodString(pod))
		want := fmt.Sprintf("Failed to create sandbox for pod %q: no network", model.PodString(pod))
		if st.Message != want || st.Cause != "no network" {
			t.Errorf("message %q cause %q, want %q and the runtime's error", st.Message, st.Cause, want)
		}
	})

	for _, tc := range []struct {
		name    string
		cause   error
		failed  bool
		passErr bool
	}{
		{name: "a deletion during the sandbox's create is no failure", cause: fmt.Errorf("pod web: %w", errdefs.ErrTerminating)},
		{name: "another cancel during the sandbox's create fails it", cause: errors.New("shutting down"), failed: true, passErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &cancellingRuntime{cause: tc.cause}
			h := syncertest.New(t, func(o *syncer.SyncerOptions) {
				rt.FakeRuntime = o.Runtime.(*enginetest.FakeRuntime)
				o.Runtime = rt
			})
			ctx, cancel := context.WithCancelCause(h.Ctx)
			defer cancel(nil)
			rt.cancel = cancel
			pod := enginetest.Pod()
			res, err := h.S.SyncPod(ctx, pod, h.In, nil)
			if (err != nil) != tc.passErr {
				t.Fatalf("SyncPod: %v, want an error: %t", err, tc.passErr)
			}
			want := "CreatePodSandbox #0 NoSandbox"
			if tc.failed {
				want = "CreatePodSandbox #0 !CreatePodSandboxError"
			}
			syncertest.WantSteps(t, res, want)
		})
	}
}

// slowStops is a runtime whose StopContainer of some containers takes
// time on the fake clock, once the given number of others wait on it, and
// that records the grace period of every stop by container name.
type slowStops struct {
	*enginetest.FakeRuntime
	t     *testing.T
	h     func() *syncertest.Harness
	slow  map[string]slowStop
	mu    sync.Mutex
	grace map[string]int64
}

type slowStop struct {
	took time.Duration
	// waiters is how many containers wait for their turn when this one
	// stops.
	waiters int
}

func (r *slowStops) StopContainer(ctx context.Context, id string, timeout int64) error {
	resp, err := r.ContainerStatus(ctx, id, false)
	if err != nil {
		return err
	}
	name := resp.GetStatus().GetMetadata().GetName()
	r.mu.Lock()
	r.grace[name] = timeout
	r.mu.Unlock()
	if s, ok := r.slow[name]; ok {
		clk := r.h().Clock
		deadline := time.Now().Add(5 * time.Second)
		for clk.Waiters() < s.waiters {
			if time.Now().After(deadline) {
				r.t.Errorf("stop of %s: %d containers wait for their turn, want %d", name, clk.Waiters(), s.waiters)
				break
			}
			time.Sleep(time.Millisecond)
		}
		clk.Step(s.took)
	}
	return r.FakeRuntime.StopContainer(ctx, id, timeout)
}

// TestSidecarGraceLessTheWaitForRegularContainers: in a pod kill a sidecar
// waits for the regular containers (and the sidecars after it) to stop,
// and that wait comes off its grace period, never below 2 s — the
// kubelet's killContainersWithSyncResult with its terminationOrdering,
// and killContainer's gracePeriod -= waitForTurn.
func TestSidecarGraceLessTheWaitForRegularContainers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sidecars []string
		slow     map[string]slowStop
		want     map[string]int64
	}{
		{
			name:     "the wait for the regular container",
			sidecars: []string{"proxy"},
			slow:     map[string]slowStop{"app": {took: 10 * time.Second, waiters: 1}},
			want:     map[string]int64{"app": 30, "proxy": 20},
		},
		{
			name:     "whole seconds, truncated",
			sidecars: []string{"proxy"},
			slow:     map[string]slowStop{"app": {took: 10*time.Second + 900*time.Millisecond, waiters: 1}},
			want:     map[string]int64{"app": 30, "proxy": 20},
		},
		{
			name:     "never below 2 s",
			sidecars: []string{"proxy"},
			slow:     map[string]slowStop{"app": {took: 29 * time.Second, waiters: 1}},
			want:     map[string]int64{"app": 30, "proxy": 2},
		},
		{
			name:     "an earlier sidecar waits for the later one too",
			sidecars: []string{"log", "proxy"},
			slow: map[string]slowStop{
				"app":   {took: 10 * time.Second, waiters: 2},
				"proxy": {took: 5 * time.Second, waiters: 1},
			},
			want: map[string]int64{"app": 30, "proxy": 20, "log": 15},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *syncertest.Harness
			rt := &slowStops{t: t, h: func() *syncertest.Harness { return h }, grace: map[string]int64{}}
			h = syncertest.New(t, func(o *syncer.SyncerOptions) {
				rt.FakeRuntime = o.Runtime.(*enginetest.FakeRuntime)
				o.Runtime = rt
			})
			pod := enginetest.Pod()
			pod.Spec.Containers = pod.Spec.Containers[:1]
			pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
			for _, name := range tc.sidecars {
				sc := enginetest.Container(name, enginetest.RunForever...)
				sc.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, sc)
			}
			for range len(tc.sidecars) + 1 {
				h.Sync(pod)
			}
			if got := h.CriContainers(); len(got) != len(tc.sidecars)+1 {
				t.Fatalf("containers %v, want every one running", got)
			}
			rt.slow = tc.slow
			pod = pod.DeepCopy()
			pod.DeletionTimestamp = ptr.To(metav1.NewTime(syncertest.T0))
			h.Sync(pod)
			rt.mu.Lock()
			defer rt.mu.Unlock()
			if diff := cmp.Diff(tc.want, rt.grace); diff != "" {
				t.Errorf("grace periods of the stops (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFailedPostStartHookAsTheKubelet: a postStart hook that fails kills
// its container with the message FailedPostStartHook, and what the hook
// printed is in the StartContainer step's message only — the PostStartHook
// step, which the FailedPostStartHook event is made of, says only
// "PostStartHook failed" (kuberuntime_container.go startContainer).
func TestFailedPostStartHookAsTheKubelet(t *testing.T) {
	const secret = "token=s3cr3t"
	for _, tc := range []struct {
		name string
		hook []string
	}{
		{name: "a hook that exits non-zero", hook: []string{"/bin/sh", "-c", "echo " + secret + " >&2; exit 3"}},
		{name: "a hook that prints and fails", hook: []string{"/bin/sh", "-c", "echo " + secret + "; exit 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := syncertest.New(t)
			pod := enginetest.Pod()
			pod.Spec.Containers = pod.Spec.Containers[:1]
			pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: tc.hook}}}
			res := h.Sync(pod)
			syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0",
				"PostStartHook app !PostStartHookError", "KillContainer app FailedPostStartHook", "StartContainer app !PostStartHookError")
			hook := syncertest.FailedStep(t, res, syncer.ActionPostStartHook, "app")
			if hook.Message != syncer.PostStartHookFailedMessage {
				t.Errorf("PostStartHook step message %q, want %q", hook.Message, syncer.PostStartHookFailedMessage)
			}
			kill := res.Step(syncer.ActionKillContainer, "app")
			if kill == nil || kill.Message != "FailedPostStartHook" || kill.Reason != "FailedPostStartHook" {
				t.Errorf("kill step %+v, want reason and message FailedPostStartHook", kill)
			}
			start := syncertest.FailedStep(t, res, syncer.ActionStartContainer, "app")
			if !strings.Contains(start.Message, secret) {
				t.Errorf("StartContainer step message %q, want the hook's output", start.Message)
			}
			for _, s := range res.Steps {
				if s.Action != syncer.ActionStartContainer && strings.Contains(s.Message, secret) {
					t.Errorf("step %s %s shows the hook's output: %q", s.Action, s.Target, s.Message)
				}
			}
		})
	}
}
