//go:build integration

package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
)

// TestJobBackoffLimit: a Job with backoffLimit 1 whose container always
// fails runs twice in place (one restart, after the crash-loop back-off)
// and then fails with the Job controller's reason, its sandbox stopped.
func TestJobBackoffLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	job := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(job, []byte("apiVersion: batch/v1\nkind: Job\nmetadata: {name: flaky}\nspec:\n  backoffLimit: 1\n"+
		"  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: work\n        image: registry.local/busybox:local\n"+
		"        command: [sh, -c, 'echo trying; exit 3']\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startPodsyncdArgs(t)
	r := d.ctl(ctx, "", "run", "-f", job, "--wait-for", "succeeded", "--timeout", "2m")
	if r.code != 1 || !strings.Contains(r.stdout, ": Job has reached the specified backoff limit") {
		t.Errorf("run of the Job: %+v", r)
	}
	p := d.pod(ctx, "flaky-0")
	st := p.GetStatus()
	if st.GetPhase() != "Failed" || st.GetReason() != "BackoffLimitExceeded" {
		t.Errorf("pod status: phase %q reason %q, want Failed BackoffLimitExceeded", st.GetPhase(), st.GetReason())
	}
	if cs := st.GetContainerStatuses(); len(cs) != 1 || cs[0].GetRestartCount() != 1 ||
		cs[0].GetState().GetTerminated().GetExitCode() != 3 {
		t.Errorf("container status: %v, want terminated with 3 after 1 restart (2 runs)", cs)
	}
	if got := p.GetSpec().GetRestartPolicy(); got != "OnFailure" {
		t.Errorf("restartPolicy %q, want OnFailure (retried in place)", got)
	}
	rs, err := inst.RuntimeService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close(context.WithoutCancel(ctx)) }()
	ready, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{model.LabelPodUID: p.GetMetadata().GetUid()},
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil || len(ready) != 0 {
		t.Errorf("ready sandboxes of the failed pod: %v (%v), want none", ready, err)
	}
}
