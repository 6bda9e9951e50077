//go:build integration

package workers_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/runpods"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// The RunPods tests run one at a time, like the rest of this package: a
// Node owns its runtime, and a second Node on the same containerd would
// see the first one's pods as orphans (or refuse to start on a new store).

// runAdmission is the admission of the RunPods tests' nodes.
func runAdmission(o *engine.NodeOptions) {
	o.Admission = &engine.AdmissionConfig{
		Node: admit.Node{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110"),
		}},
		// Two pods of the batch publish a host port, which the baseline
		// level refuses unless the operator opens it.
		Policy: admit.Policy{AllowedHostPorts: []admit.PortRange{{From: 1024, To: 65535}}},
	}
}

func requests(c corev1.Container, cpu string) corev1.Container {
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	return c
}

func (e *env) summary(s runpods.Summary) []string {
	var out []string
	for _, r := range s.Results {
		out = append(out, fmt.Sprintf("%s %s %s", r.Pod.Name, r.Outcome, r.Reason))
	}
	return out
}

// TestRunPodsAdmitsAndRuns is issue 7's batch: ten pods, one asking for
// more CPU than allocatable, one for a host port another pod holds.
func TestRunPodsAdmitsAndRuns(t *testing.T) {
	e := newEnv(t, runAdmission)
	port, err := inst.HostPort(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	batch := func() []*corev1.Pod {
		var pods []*corev1.Pod
		for i := range 10 {
			c := requests(localcritest.Busybox("app"), "10m")
			switch i {
			case 2, 7:
				c.Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: int32(port), HostIP: "127.0.0.1", Protocol: corev1.ProtocolTCP}}
			case 5:
				c = requests(c, "3")
			}
			pods = append(pods, e.newPod(fmt.Sprintf("p%d", i), c))
		}
		return pods
	}

	t.Run("all or nothing runs none", func(t *testing.T) {
		s, err := e.node.RunPods(e.ctx, runpods.Request{Pods: batch(), AllOrNothing: true, Timeout: time.Minute}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Rejected != 10 {
			t.Errorf("rejected %d of 10: %v", s.Rejected, e.summary(s))
		}
		if recs, _, _ := e.node.List(e.ctx, store.Filter{}); len(recs) != 0 {
			t.Errorf("%d pods stored after an ALL_OR_NOTHING rejection", len(recs))
		}
		if ids := localcritest.CrictlIDs(t, inst, "pods", "-q", "--namespace", namespace); len(ids) != 0 {
			t.Errorf("sandboxes created: %v", ids)
		}
	})

	t.Run("best effort runs eight", func(t *testing.T) {
		pods := batch()
		s, err := e.node.RunPods(e.ctx, runpods.Request{Pods: pods, Timeout: time.Minute}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.ReachedTarget != 8 || s.Rejected != 2 || s.Failed != 0 || s.TimedOut != 0 {
			t.Errorf("summary %d/%d/%d/%d: %v", s.ReachedTarget, s.Rejected, s.Failed, s.TimedOut, e.summary(s))
		}
		if r := s.Results[5]; r.Outcome != runpods.Rejected || r.Reason != admit.ReasonOutOfCPU {
			t.Errorf("pod 5: %s %s, want Rejected OutOfcpu", r.Outcome, r.Reason)
		}
		if r := s.Results[7]; r.Outcome != runpods.Rejected || r.Reason != admit.ReasonNodePorts {
			t.Errorf("pod 7: %s %s, want Rejected NodePorts", r.Outcome, r.Reason)
		}
		for i, r := range s.Results {
			if r.Outcome == runpods.ReachedTarget && r.Status.Phase != corev1.PodRunning {
				t.Errorf("pod %d reached its target with phase %s", i, r.Status.Phase)
			}
		}
	})
}

// TestRunPodsReportsAFailedJob: a container that prints a line and exits
// 1 under restartPolicy Never gives a failed result naming the container,
// exit code 1 and that line.
func TestRunPodsReportsAFailedJob(t *testing.T) {
	e := newEnv(t, runAdmission)
	pod := e.newPod("job", localcritest.Busybox("work", "/bin/sh", "-c", "echo cannot reach the database; exit 1"))
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	s, err := e.node.RunPods(e.ctx, runpods.Request{Pods: []*corev1.Pod{pod}, WaitFor: runpods.Succeeded, Timeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Results[0]
	if r.Outcome != runpods.Failed || s.Failed != 1 {
		t.Fatalf("outcome %s %s, want Failed", r.Outcome, r.Reason)
	}
	if len(r.FailedContainers) != 1 {
		t.Fatalf("failed containers %+v, want the one container", r.FailedContainers)
	}
	fc := r.FailedContainers[0]
	if fc.Name != "work" || fc.ExitCode == nil || *fc.ExitCode != 1 || !slices.Contains(fc.LogTail, "cannot reach the database") {
		t.Errorf("failed container %+v (exit %v), want work, exit 1 and its line", fc, fc.ExitCode)
	}
}

// TestRunPodsWaitsForSuccess: wait_for SUCCEEDED returns when the job-like
// pod's container exits 0.
func TestRunPodsWaitsForSuccess(t *testing.T) {
	e := newEnv(t, runAdmission)
	pod := e.newPod("job", localcritest.Busybox("work", "/bin/sh", "-c", "sleep 1; echo done"))
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	s, err := e.node.RunPods(e.ctx, runpods.Request{Pods: []*corev1.Pod{pod}, WaitFor: runpods.Succeeded, Timeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Results[0]; r.Outcome != runpods.ReachedTarget || r.Status.Phase != corev1.PodSucceeded {
		t.Errorf("outcome %s, phase %s; want ReachedTarget, Succeeded", r.Outcome, r.Status.Phase)
	}
}

// TestRunPodsTimeoutLeavesThePod: a 1 s timeout on a pod that needs
// longer is reported as DeadlineExceeded, and the pod keeps going. (That
// the other pods of a batch are unaffected is runpods' TestTimeoutIsPerPod;
// a 1 s budget for a pod that should make it would only measure the
// machine's load.)
func TestRunPodsTimeoutLeavesThePod(t *testing.T) {
	e := newEnv(t, runAdmission)
	slow := e.newPod("slow", localcritest.Busybox("app"))
	slow.Spec.InitContainers = []corev1.Container{localcritest.Busybox("wait", "/bin/sh", "-c", "sleep 3")}
	s, err := e.node.RunPods(e.ctx, runpods.Request{Pods: []*corev1.Pod{slow}, Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Results[0]; r.Outcome != runpods.TimedOut || r.Reason != runpods.ReasonDeadlineExceeded || s.TimedOut != 1 {
		t.Errorf("slow pod: %s %s, want TimedOut DeadlineExceeded", r.Outcome, r.Reason)
	}
	e.eventually("the slow pod runs after its timeout", func() bool {
		return e.running(slow, "app") != nil
	})
}
