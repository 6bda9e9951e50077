//go:build integration

package workers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/runpods"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// TestRunPodsFailsAtOnceOnASyncErrorThatWillNotClear: a pod whose sync
// fails with an error that is not a back-off and will not clear by itself
// gets its result at once, long before its timeout — Failed, SyncError,
// `error syncing pod "NAME_NS(UID)": failed to "ACTION" for "TARGET" …` —
// and stays stored, its worker still converging it.
func TestRunPodsFailsAtOnceOnASyncErrorThatWillNotClear(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
		// action and target of the failed step; the target "" is the pod.
		action, target, reason string
	}{
		{
			name:   "a runtime handler containerd does not have",
			mutate: func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("podsync-no-such-handler") },
			action: "CreatePodSandbox", reason: "CreatePodSandboxError",
		},
		{
			name: "a failed postStart hook under Never",
			mutate: func(p *corev1.Pod) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
					Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "echo no; exit 1"}}}}
			},
			action: "StartContainer", target: "app", reason: "PostStartHookError",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, runAdmission)
			pod := e.newPod("", localcritest.Busybox("app"))
			tc.mutate(pod)
			const timeout = 2 * time.Minute
			s, err := e.node.RunPods(e.ctx, runpods.Request{Pods: []*corev1.Pod{pod}, Timeout: timeout}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := s.Results[0]
			if r.Outcome != runpods.Failed || r.Reason != runpods.ReasonSyncError {
				t.Fatalf("result %s %s %q, want Failed SyncError", r.Outcome, r.Reason, r.Message)
			}
			target := tc.target
			if target == "" {
				target = model.PodString(pod)
			}
			prefix := fmt.Sprintf("error syncing pod %q: failed to %q for %q with %s: ", model.PodString(pod), tc.action, target, tc.reason)
			if !strings.HasPrefix(r.Message, prefix) {
				t.Errorf("message %q, want it to start %q", r.Message, prefix)
			}
			if r.Duration >= timeout/2 {
				t.Errorf("result after %s, want it at once", r.Duration)
			}
			recs, _, err := e.node.List(e.ctx, store.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 || recs[0].Pod.UID != pod.UID {
				t.Errorf("stored pods %d, want the failed one kept", len(recs))
			}
		})
	}
}

// TestRunPodsWaitsForAMissingConfigMap: a container whose env names a
// ConfigMap nobody supplied waits for it, as on a kubelet (it may be
// applied later), so the pod times out — and the timeout's message says
// what the container waits for: CreateContainerConfigError, naming the
// ConfigMap.
func TestRunPodsWaitsForAMissingConfigMap(t *testing.T) {
	e := newEnv(t, runAdmission)
	pod := e.newPod("", localcritest.Busybox("app"))
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "mode"}}}}
	s, err := e.node.RunPods(e.ctx, runpods.Request{Pods: []*corev1.Pod{pod}, Timeout: 15 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Results[0]
	if r.Outcome != runpods.TimedOut || r.Reason != runpods.ReasonDeadlineExceeded {
		t.Fatalf("result %s %s %q, want TimedOut DeadlineExceeded", r.Outcome, r.Reason, r.Message)
	}
	if !strings.Contains(r.Message, "container app waiting: CreateContainerConfigError") || !strings.Contains(r.Message, "absent") {
		t.Errorf("timeout message %q, want it to say app waits for the ConfigMap absent", r.Message)
	}
}
