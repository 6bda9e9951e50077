//go:build integration

package daemon_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// TestSIGTERMDuringRunPods stops podsyncd while a RunPods of five pods is
// streaming: the call ends with UNAVAILABLE (SHUTTING_DOWN), podsyncd
// exits 0 within its shutdown timeout, and the pods it created keep
// running. A new podsyncd on the same root dir and runtime then takes the
// same request to the end: every pod Running, in the sandbox it already
// had, and nothing in the runtime that podsync did not label.
func TestSIGTERMDuringRunPods(t *testing.T) {
	ctx := testContext(t)
	const shutdownTimeout = 4 * time.Second
	opts := daemonOptions{ShutdownTimeout: shutdownTimeout}
	d := startPodsyncd(t, opts)
	rs := runtimeClient(t)

	// Each pod waits in an init container longer than the shutdown takes,
	// so the RunPods cannot finish before podsyncd stops.
	const initSeconds = 8
	var pods []*podsyncv1.Pod
	for i := range 5 {
		p := newCorePod(t, fmt.Sprintf("p%d", i), sleeper("app"))
		p.Spec.InitContainers = []corev1.Container{localcritest.Busybox("wait", "sleep", strconv.Itoa(initSeconds))}
		pods = append(pods, podToProto(t, p))
	}
	req := &podsyncv1.RunPodsRequest{Pods: pods, Timeout: durationpb.New(time.Minute)}

	stream, err := d.client().RunPods(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatalf("RunPods: %v", err)
	}
	if first.GetStep() == nil && first.GetStatus() == nil {
		t.Fatalf("first message %v, want a step or a status", first)
	}
	d.Signal(syscall.SIGTERM)
	sent := time.Now()
	msgs := 1
	for {
		m, err := stream.Recv()
		if err == nil {
			if m.GetSummary() != nil {
				t.Fatalf("RunPods finished with a summary although its pods wait %d s: %v", initSeconds, m.GetSummary())
			}
			msgs++
			continue
		}
		st := status.Convert(err)
		if st.Code() != codes.Unavailable || errorReason(err) != errorinfo.ReasonShuttingDown || st.Message() == "" {
			t.Errorf("RunPods ended with %v (reason %q), want UNAVAILABLE with reason %s and a message",
				err, errorReason(err), errorinfo.ReasonShuttingDown)
		}
		t.Logf("RunPods ended after %d messages, %s after SIGTERM: %v", msgs, time.Since(sent).Round(time.Millisecond), err)
		break
	}
	code := d.wait(shutdownTimeout + 10*time.Second)
	took := d.ExitedAt().Sub(sent)
	t.Logf("podsyncd exited %d, %s after SIGTERM", code, took.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("podsyncd exited %d after SIGTERM, want 0", code)
	}
	// Calls are cut at the timeout; stopping the node and closing the
	// store come after.
	if took > shutdownTimeout+2*time.Second {
		t.Errorf("podsyncd took %s to exit, its shutdown timeout is %s", took, shutdownTimeout)
	}
	for line := range strings.Lines(d.LogText()) {
		if strings.Contains(line, "shut") || strings.Contains(line, "stop") {
			t.Logf("podsyncd: %s", strings.TrimSpace(line))
		}
	}
	for _, w := range []string{`"shutting down"`, `"podsyncd stopped"`} {
		if !d.logHas(w) {
			t.Errorf("podsyncd's log lacks %s", w)
		}
	}

	// podsyncd is not the pods' parent: what it created runs on.
	created := map[string][]string{}
	for _, p := range pods {
		uid := p.GetMetadata().GetUid()
		ready, notReady := sandboxesOf(ctx, t, rs, uid)
		if len(notReady) > 0 || len(ready) > 1 {
			t.Errorf("pod %s after podsyncd stopped: sandboxes ready %v, not ready %v", p.GetMetadata().GetName(), ready, notReady)
		}
		created[uid] = ready
		for _, sb := range ready {
			cs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb})
			if err != nil {
				t.Fatal(err)
			}
			// Running, or (on a slow machine) the init container done
			// on its own: not killed.
			for _, c := range cs {
				st, err := rs.ContainerStatus(ctx, c.GetId(), false)
				if err != nil {
					t.Fatal(err)
				}
				if s := st.GetStatus(); s.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING &&
					(s.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || s.GetExitCode() != 0) {
					t.Errorf("pod %s: container %s is %v (exit code %d) after podsyncd stopped, want running",
						p.GetMetadata().GetName(), c.GetMetadata().GetName(), s.GetState(), s.GetExitCode())
				}
			}
		}
	}
	t.Logf("sandboxes when podsyncd stopped: %v", created)

	// A new podsyncd on the same state finishes the job.
	opts.RootDir, opts.PodLogDir = d.opts.RootDir, d.opts.PodLogDir
	d2 := startPodsyncd(t, opts)
	stream, err = d2.client().RunPods(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var sum *podsyncv1.RunPodsSummary
	for sum == nil {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("RunPods after the restart: %v", err)
		}
		sum = m.GetSummary()
	}
	if sum.GetReachedTarget() != int32(len(pods)) {
		t.Errorf("summary after the restart: %v", sum)
	}
	for i, r := range sum.GetResults() {
		if r.GetOutcome() != podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET || r.GetStatus().GetPhase() != string(corev1.PodRunning) {
			t.Errorf("result %d: %s %v phase %q", i, r.GetPod().GetName(), r.GetOutcome(), r.GetStatus().GetPhase())
		}
		if cs := r.GetStatus().GetContainerStatuses(); len(cs) != 1 || cs[0].GetRestartCount() != 0 {
			t.Errorf("result %d: container statuses %v, want app not restarted", i, cs)
		}
	}
	for _, p := range pods {
		uid := p.GetMetadata().GetUid()
		ready, notReady := sandboxesOf(ctx, t, rs, uid)
		if len(ready) != 1 || len(notReady) != 0 {
			t.Errorf("pod %s: sandboxes ready %v, not ready %v; want exactly one, ready", p.GetMetadata().GetName(), ready, notReady)
		}
		if len(created[uid]) == 1 && !slices.Equal(ready, created[uid]) {
			t.Errorf("pod %s: sandbox %v, want %v from before the restart", p.GetMetadata().GetName(), ready, created[uid])
		}
	}
	checkAllLabelled(ctx, t, rs)
}

// checkAllLabelled fails the test for any sandbox or container in the
// runtime that does not carry podsync's labels.
func checkAllLabelled(ctx context.Context, t *testing.T, rs cri.RuntimeService) {
	t.Helper()
	sbs, err := rs.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		l := sb.GetLabels()
		if !model.IsManaged(l) || l[model.LabelPodUID] == "" || l[model.LabelPodName] == "" || l[model.LabelPodNamespace] == "" {
			t.Errorf("sandbox %s lacks podsync's labels: %v", sb.GetId(), l)
		}
	}
	cs, err := rs.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		l := c.GetLabels()
		if !model.IsManaged(l) || l[model.LabelPodUID] == "" || l[model.LabelContainerName] == "" {
			t.Errorf("container %s lacks podsync's labels: %v", c.GetId(), l)
		}
	}
}
