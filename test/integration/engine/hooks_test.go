//go:build integration

package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
)

func execHook(script string) *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", script}}}
}

func TestLifecycleHooksRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	pod.Spec.Volumes = []corev1.Volume{{Name: "hooks", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "hooks", MountPath: "/hooks"}}
	c.Lifecycle = &corev1.Lifecycle{
		PostStart: execHook("echo post-start >> /hooks/log"),
		PreStop:   execHook("echo pre-stop >> /hooks/log"),
	}
	log := filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "hooks", e.cfg), "log")

	res := e.until(pod, "running", e.running(pod))
	if s := res.Step(syncer.ActionPostStartHook, "app"); s == nil || s.Err != nil {
		t.Fatalf("steps %v, want a postStart hook", steps(res.Steps))
	}
	if data, err := os.ReadFile(log); err != nil || string(data) != "post-start\n" {
		t.Fatalf("hook log after start = %q, %v", data, err)
	}

	pod.DeletionTimestamp = ptr.To(metav1.Now())
	res = e.sync(pod)
	got := steps(res.Steps)
	if len(got) < 2 || got[0] != "PreStopHook app" || got[1] != "KillContainer app PodKilled" {
		t.Errorf("kill steps %v, want the preStop hook, then the kill", got)
	}
	if data, err := os.ReadFile(log); err != nil || string(data) != "post-start\npre-stop\n" {
		t.Errorf("hook log after the kill = %q, %v", data, err)
	}
	if n := newest(t, res, "app"); n.State != model.ContainerExited || n.ExitCode != 0 {
		t.Errorf("app = %+v, want exited 0 (its SIGTERM trap)", n)
	}
}

func TestFailingPostStartKillsTheContainer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: execHook("echo refusing >&2; exit 7")}
	res := e.sync(pod)
	st := res.Step(syncer.ActionStartContainer, "app")
	if st == nil || st.Reason != syncer.ReasonPostStartHookError || st.Err == nil {
		t.Fatalf("steps %v, want PostStartHookError", steps(res.Steps))
	}
	if !strings.Contains(st.Message, "refusing") || !strings.Contains(st.Message, "exited with 7") {
		t.Errorf("message %q, want the hook's output and exit code", st.Message)
	}
	if !hasStep(res, syncer.ActionKillContainer, "app", "FailedPostStartHook") {
		t.Errorf("steps %v, want the container killed", steps(res.Steps))
	}
	if n := newest(t, res, "app"); n.State != model.ContainerExited {
		t.Errorf("app = %+v, want exited", n)
	}
}

func TestPreStopIsBoundedByTheGracePeriod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: execHook("sleep 60")}
	e.until(pod, "running", e.running(pod))
	pod.DeletionTimestamp = ptr.To(metav1.Now())
	pod.DeletionGracePeriodSeconds = ptr.To[int64](2)
	start := time.Now()
	res := e.sync(pod)
	took := time.Since(start)
	hook := res.Step(syncer.ActionPreStopHook, "app")
	if hook == nil || hook.Err == nil || hook.Reason != syncer.ReasonPreStopHookError {
		t.Fatalf("steps %v, want a preStop hook cut short", steps(res.Steps))
	}
	if !hasStep(res, syncer.ActionKillContainer, "app", plan.KillReasonPodDeleted) && !hasStep(res, syncer.ActionKillContainer, "app", plan.ReasonPodKilled) {
		t.Errorf("steps %v, want the container killed", steps(res.Steps))
	}
	// 2 s for the hook, then SIGTERM, which the default command obeys.
	if took > 30*time.Second {
		t.Errorf("the kill took %s; the hook was not bounded by the grace period", took)
	}
	if n := newest(t, res, "app"); n.State != model.ContainerExited {
		t.Errorf("app = %+v, want exited", n)
	}
}
