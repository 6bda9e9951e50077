//go:build integration

package engine_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// TestContainerRestartRules: the container restart policy and rules of
// KEP-5307 on containerd, in a pod whose restartPolicy is Never. The
// worker's rule restarts it when it exits 42 (twice), and its own policy
// Never leaves it exited when it exits 3, which fails the pod; the init
// container's own policy OnFailure retries it once it failed, where the
// pod's Never would have failed the pod.
func TestContainerRestartRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *syncer.SyncerOptions) { o.Backoff = plan.BackoffPolicy{Base: 200 * time.Millisecond} })
	pod := e.newPod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Volumes = []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	state := []corev1.VolumeMount{{Name: "state", MountPath: "/state"}}

	migrate := localcritest.Shell("migrate", "test -e /state/migrated && exit 0; touch /state/migrated; exit 1")
	migrate.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyOnFailure)
	migrate.VolumeMounts = state
	worker := localcritest.Shell("worker", `n=$(($(cat /state/runs 2>/dev/null || echo 0) + 1)); echo $n > /state/runs; [ $n -ge 3 ] && exit 3; exit 42`)
	worker.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
	worker.RestartPolicyRules = []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}
	worker.VolumeMounts = state
	pod.Spec.InitContainers = []corev1.Container{migrate}
	pod.Spec.Containers = []corev1.Container{worker}

	res := e.until(pod, "the pod failed", func(r syncer.SyncResult) bool { return e.status(pod, r).Phase == corev1.PodFailed })
	if n := newest(t, res, "migrate"); n.RestartCount != 1 || n.State != model.ContainerExited || n.ExitCode != 0 {
		t.Errorf("migrate = restart count %d, %s, exit %d; want retried once, then exited 0", n.RestartCount, n.State, n.ExitCode)
	}
	if n := newest(t, res, "worker"); n.RestartCount != 2 || n.State != model.ContainerExited || n.ExitCode != 3 {
		t.Errorf("worker = restart count %d, %s, exit %d; want restarted twice (exit 42), then exited 3", n.RestartCount, n.State, n.ExitCode)
	}
	// Exit 3 matches no rule and the worker's own policy is Never: it
	// stays exited, and so does the pod.
	for range 3 {
		r := e.sync(pod)
		for _, s := range r.Steps {
			if s.Action == syncer.ActionStartContainer || s.Action == syncer.ActionCreatePodSandbox {
				t.Errorf("a pass after the failure did %v", steps(r.Steps))
			}
		}
	}
}
