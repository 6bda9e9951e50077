package syncer_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// running brings basePod (as mutated) to running and returns it.
func running(mutate ...func(*corev1.Pod)) func(*syncertest.Harness) *corev1.Pod {
	return func(h *syncertest.Harness) *corev1.Pod {
		h.T.Helper()
		pod := enginetest.Pod()
		for _, m := range mutate {
			m(pod)
		}
		h.Converged(pod, h.Sync(pod))
		return pod
	}
}

// fresh returns basePod (as mutated) without running it.
func fresh(mutate ...func(*corev1.Pod)) func(*syncertest.Harness) *corev1.Pod {
	return func(*syncertest.Harness) *corev1.Pod {
		pod := enginetest.Pod()
		for _, m := range mutate {
			m(pod)
		}
		return pod
	}
}

func withHooks(postStart, preStop []string) func(*corev1.Pod) {
	return func(pod *corev1.Pod) {
		lc := &corev1.Lifecycle{}
		if postStart != nil {
			lc.PostStart = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: postStart}}
		}
		if preStop != nil {
			lc.PreStop = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: preStop}}
		}
		pod.Spec.Containers[0].Lifecycle = lc
	}
}

func changeCommand(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "while :; do sleep 5; done"}
	return pod
}

// TestInjectedErrors makes every CRI call the executor makes fail once:
// the pass reports the kubelet's reason (or, for the reads that precede
// planning, fails), and the next pass converges.
func TestInjectedErrors(t *testing.T) {
	injected := status.Error(codes.Unavailable, "injected failure")
	for _, tc := range []struct {
		name   string
		method string
		// setup brings the pod to where the next pass makes the call, and
		// returns the pod to sync.
		setup func(*syncertest.Harness) *corev1.Pod
		// passErr: the pass itself fails (reads before planning).
		passErr bool
		want    []string
		// between runs before the converging pass.
		between func(*testing.T, *syncertest.Harness, *corev1.Pod)
	}{
		{name: "list sandboxes", method: "ListPodSandbox", setup: fresh(), passErr: true},
		{name: "list containers", method: "ListContainers", setup: fresh(), passErr: true},
		{name: "read sandbox status", method: "PodSandboxStatus", setup: running(), passErr: true},
		{name: "read container status", method: "ContainerStatus", setup: running(), passErr: true},
		{
			name: "run sandbox", method: "RunPodSandbox", setup: fresh(),
			want: []string{"CreatePodSandbox #0 !CreatePodSandboxError"},
		},
		{
			name: "status of the new sandbox", method: "PodSandboxStatus", setup: fresh(),
			want: []string{"CreatePodSandbox #0 !CreatePodSandboxError"},
		},
		{
			name: "inspect image", method: "ImageStatus", setup: fresh(),
			want: []string{
				"CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0",
				"StartContainer app !ImageInspectError", "StartContainer helper NewSandbox",
			},
		},
		{
			name: "pull image", method: "PullImage",
			setup: fresh(func(pod *corev1.Pod) {
				pod.Spec.Containers = pod.Spec.Containers[:1]
				pod.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
			}),
			want: []string{
				"CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0",
				"PullImage " + enginetest.Image + " !ErrImagePull", "StartContainer app !ErrImagePull",
			},
			between: func(t *testing.T, h *syncertest.Harness, pod *corev1.Pod) {
				res := h.Sync(pod)
				syncertest.WantSteps(t, res, "StartContainer app ImagePullBackOff")
				if msg := res.Steps[0].Message; !strings.Contains(msg, "Back-off pulling image") || !strings.Contains(msg, "injected failure") {
					t.Errorf("back-off message %q, want the kubelet's with the pull error", msg)
				}
				if cs := h.S.PodStatus(pod, res.View, model.ProbeResults{}).ContainerStatuses[0]; cs.State.Waiting == nil || cs.State.Waiting.Reason != plan.ReasonImagePullBackOff {
					t.Errorf("status %+v, want waiting in ImagePullBackOff", cs.State)
				}
				h.Clock.Step(plan.DefaultBackoffBase)
			},
		},
		{
			name: "create container", method: "CreateContainer", setup: fresh(),
			want: []string{
				"CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0",
				"StartContainer app !CreateContainerError", "StartContainer helper NewSandbox",
			},
		},
		{
			// The created container is left; the next pass starts a new
			// instance and removes it.
			name: "start container", method: "StartContainer", setup: fresh(),
			want: []string{
				"CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0",
				"StartContainer app !RunContainerError", "StartContainer helper NewSandbox",
			},
		},
		{
			name: "postStart hook", method: "ExecSync", setup: fresh(withHooks([]string{"true"}, nil)),
			want: []string{
				"CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0",
				"PostStartHook app !PostStartHookError", "KillContainer app FailedPostStartHook", "StartContainer app !PostStartHookError",
				"StartContainer helper NewSandbox",
			},
		},
		{
			name: "preStop hook", method: "ExecSync",
			setup: func(h *syncertest.Harness) *corev1.Pod {
				return changeCommand(running(withHooks(nil, []string{"true"}))(h))
			},
			want: []string{
				"PreStopHook app !PreStopHookError", "KillContainer app DefinitionChanged",
				"ConfigPodSandbox #0", "StartContainer app DefinitionChanged",
			},
		},
		{
			// A failed kill aborts the pass.
			name: "stop container", method: "StopContainer",
			setup: func(h *syncertest.Harness) *corev1.Pod { return changeCommand(running()(h)) },
			want:  []string{"KillContainer app !KillContainerError"},
		},
		{
			name: "stop sandbox", method: "StopPodSandbox",
			setup: func(h *syncertest.Harness) *corev1.Pod {
				pod := running()(h)
				if err := h.RT.StopPodSandbox(h.Ctx, h.Sync(pod).SandboxID); err != nil {
					h.T.Fatal(err)
				}
				return pod
			},
			want: []string{"KillPodSandbox #0 !KillPodSandboxError"},
		},
		{
			name: "remove container", method: "RemoveContainer",
			setup: func(h *syncertest.Harness) *corev1.Pod {
				pod := enginetest.Pod()
				h.RT.InjectError("StartContainer", injected)
				h.Sync(pod)
				return pod
			},
			want: []string{"ConfigPodSandbox #0", "StartContainer app Created", "RemoveContainer app !RemoveContainerError"},
		},
		{
			name: "remove sandbox", method: "RemovePodSandbox",
			setup: func(h *syncertest.Harness) *corev1.Pod {
				// A sandbox without containers, stopped from outside.
				pod := enginetest.Pod()
				h.RT.InjectError("CreateContainer", injected)
				h.RT.InjectError("CreateContainer", injected)
				res := h.Sync(pod)
				if err := h.RT.StopPodSandbox(h.Ctx, res.SandboxID); err != nil {
					h.T.Fatal(err)
				}
				return pod
			},
			want: []string{
				"KillPodSandbox #0 SandboxChanged", "CreatePodSandbox #1 SandboxNotReady", "ConfigPodSandbox #1",
				"StartContainer app NewSandbox", "StartContainer helper NewSandbox",
				"RemovePodSandbox #0 !RemovePodSandboxError",
			},
		},
	} {
		t.Run(tc.method+"/"+tc.name, func(t *testing.T) {
			h := syncertest.New(t)
			pod := tc.setup(h)
			h.RT.InjectError(tc.method, injected)
			res, err := h.TrySync(pod)
			if tc.passErr {
				if !errors.Is(err, injected) {
					t.Fatalf("SyncPod: %v, want the injected error", err)
				}
			} else {
				if err != nil {
					t.Fatalf("SyncPod: %v", err)
				}
				syncertest.WantSteps(t, res, tc.want...)
				for _, s := range res.Steps {
					if s.Err != nil && !errors.Is(s.Err, injected) {
						t.Errorf("step %s %s: error %v does not wrap the injected one", s.Action, s.Target, s.Err)
					}
				}
			}
			if tc.between != nil {
				tc.between(t, h, pod)
			}
			h.Converged(pod, h.Sync(pod))
		})
	}
}
