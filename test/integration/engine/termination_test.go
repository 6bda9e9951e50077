//go:build integration

package engine_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// TestTerminationMessages: the termination messages of node-conformance's
// "Container Runtime ... termination message" tests (test/e2e/common/node/
// runtime.go), on containerd: the file at terminationMessagePath, and
// under FallbackToLogsOnError the end of the log of a failed container
// that wrote none — including its last write without a newline, which
// containerd logs as a partial line — while a container that succeeded
// has an empty message, or the file's.
func TestTerminationMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	container := func(name, script string, policy corev1.TerminationMessagePolicy) corev1.Container {
		c := localcritest.Busybox(name, "/bin/sh", "-c", script)
		c.TerminationMessagePolicy = policy
		return c
	}
	pod.Spec.Containers = []corev1.Container{
		container("file", "/bin/echo -n DONE > /dev/termination-log", corev1.TerminationMessageReadFile),
		container("logs-failed", "/bin/echo -n DONE; /bin/false", corev1.TerminationMessageFallbackToLogsOnError),
		container("logs-succeeded", "/bin/echo -n DONE; /bin/true", corev1.TerminationMessageFallbackToLogsOnError),
		container("file-over-logs", "/bin/echo -n OK > /dev/termination-log; /bin/echo logged; /bin/false", corev1.TerminationMessageFallbackToLogsOnError),
		container("logs-lines", "for i in 1 2 3; do echo line $i; done; exit 3", corev1.TerminationMessageFallbackToLogsOnError),
		container("logs-stderr", "echo oops >&2; exit 4", corev1.TerminationMessageFallbackToLogsOnError),
	}
	want := map[string]string{
		"file":           "DONE",
		"logs-failed":    "DONE",
		"logs-succeeded": "",
		"file-over-logs": "OK",
		"logs-lines":     "line 1\nline 2\nline 3\n",
		"logs-stderr":    "oops\n",
	}
	res := e.until(pod, "every container exited", func(res syncer.SyncResult) bool {
		for _, c := range pod.Spec.Containers {
			if inst := res.View.FindContainer(c.Name); inst == nil || inst.State != model.ContainerExited {
				return false
			}
		}
		return true
	})
	for _, cs := range e.status(pod, res).ContainerStatuses {
		term := cs.State.Terminated
		if term == nil {
			t.Errorf("%s: state %+v, want terminated", cs.Name, cs.State)
			continue
		}
		if term.Message != want[cs.Name] {
			t.Errorf("%s: termination message %q, want %q", cs.Name, term.Message, want[cs.Name])
		}
	}
}
