package syncer_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// TestEphemeralContainerLifecycle: an ephemeral container added to a
// running pod starts once in the target's PID namespace (NamespaceMode
// TARGET with the target's container ID), is not restarted after it
// exits, is not collected while the pod runs, and is stopped with the
// pod.
func TestEphemeralContainerLifecycle(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	res := h.Sync(pod)
	app := syncertest.Newest(t, res, "app")

	pod = pod.DeepCopy()
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: enginetest.Image,
			Command: []string{"sleep", "3600"}, TerminationMessagePolicy: corev1.TerminationMessageReadFile},
		TargetContainerName: "app",
	}}
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer debug NotStarted")
	for _, s := range res.Steps {
		if s.Action == syncer.ActionStartContainer && s.ContainerType != syncer.ContainerTypeEphemeral {
			t.Errorf("step %+v, want container type ephemeral", s)
		}
	}
	dbg := syncertest.Newest(t, res, "debug")
	if dbg.State != model.ContainerRunning {
		t.Fatalf("debug = %+v, want running", dbg)
	}
	ns := h.RT.NamespaceOptions(dbg.ID)
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != app.ID {
		t.Errorf("debug's namespaces = %v, want pid TARGET of app's container %s", ns, app.ID)
	}
	st := h.S.PodStatus(pod, res.View, model.ProbeResults{})
	if len(st.EphemeralContainerStatuses) != 1 || st.EphemeralContainerStatuses[0].State.Running == nil {
		t.Errorf("EphemeralContainerStatuses = %+v, want debug running", st.EphemeralContainerStatuses)
	}

	// Once exited, it stays exited: no restart, no collection.
	h.Exit(res, "debug", 0)
	for range 3 {
		res = h.Sync(pod)
		syncertest.WantSteps(t, res)
	}
	if inst := syncertest.Newest(t, res, "debug"); inst.ID != dbg.ID || inst.State != model.ContainerExited {
		t.Errorf("debug = %+v, want the first instance, exited", inst)
	}

	// A second one, still running, goes with the pod.
	pod = pod.DeepCopy()
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug2", Image: enginetest.Image, Command: []string{"sleep", "3600"}},
	})
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "StartContainer debug2 NotStarted")
	pod = pod.DeepCopy()
	pod.DeletionTimestamp = ptr.To(metav1.NewTime(syncertest.T0))
	pod.DeletionGracePeriodSeconds = ptr.To[int64](5)
	res = h.Sync(pod)
	// The containers are killed at once (the kubelet's termination
	// ordering), in no fixed order; the sandbox last.
	got := syncertest.Summary(res.Steps)
	if !slices.Contains(got, "KillContainer debug2 PodKilled") || len(got) != 4 || got[3] != "KillPodSandbox #0 PodDeleted" {
		t.Errorf("steps %v, want app, helper and debug2 killed, then the sandbox", got)
	}
	if inst := res.View.FindContainer("debug2"); inst == nil || inst.State == model.ContainerRunning {
		t.Errorf("debug2 = %+v, want stopped with the pod", inst)
	}
}

// TestEphemeralContainerTargetNotRunning: the kubelet's getTargetID — a
// target that does not run fails the start with a config error, and the
// ephemeral container is not created.
func TestEphemeralContainerTargetNotRunning(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	res := h.Sync(pod)
	h.Exit(res, "app", 0)
	h.Sync(pod)
	pod = pod.DeepCopy()
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: enginetest.Image},
		TargetContainerName:      "app",
	}}
	res, _ = h.TrySync(pod)
	var found bool
	for _, s := range res.Steps {
		if s.Target == "debug" {
			found = true
			if s.Reason != syncer.ReasonCreateContainerConfigErr || s.Err == nil {
				t.Errorf("debug step %+v, want %s", s, syncer.ReasonCreateContainerConfigErr)
			}
		}
	}
	if !found {
		t.Errorf("no step for debug in %v", syncertest.Summary(res.Steps))
	}
	if inst := res.View.FindContainer("debug"); inst != nil {
		t.Errorf("debug created: %+v", inst)
	}
}
