package server_test

import (
	"errors"
	"io"
	"regexp"
	"testing"

	"go.uber.org/zap/zaptest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testdaemon"
)

// TestGenerateName: RunPods names a pod that has only a generateName as
// the API server does on create — the prefix and five random characters —
// with a random uid, a new pod each time; SyncPod and PlanPod, which
// address one pod by its name, refuse it and say why.
func TestGenerateName(t *testing.T) {
	h := newHarness(t, testdaemon.Options{Transport: testdaemon.Bufconn, Logger: zaptest.NewLogger(t)}, nil)
	generated := func() *podsyncv1.Pod {
		p := testPod(t, "default", "", nil)
		p.Metadata.GenerateName = "web-"
		return p
	}
	stream, err := h.c.RunPods(h.ctx, &podsyncv1.RunPodsRequest{Pods: []*podsyncv1.Pod{generated(), generated()}})
	if err != nil {
		t.Fatal(err)
	}
	var sum *podsyncv1.RunPodsSummary
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.GetSummary() != nil {
			sum = m.GetSummary()
		}
	}
	if sum.GetReachedTarget() != 2 {
		t.Fatalf("summary %v, want both pods running", sum)
	}
	name := regexp.MustCompile(`^web-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
	seen := map[string]bool{}
	for _, r := range sum.GetResults() {
		n, uid := r.GetPod().GetName(), r.GetPod().GetUid()
		if !name.MatchString(n) || seen[n] || uid == "" {
			t.Errorf("result for %q (uid %q): want a new name web-XXXXX and a uid", n, uid)
		}
		seen[n] = true
		got, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Namespace: "default", Name: n})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetPod().GetMetadata().GetGenerateName() != "web-" {
			t.Errorf("stored metadata %v, want generateName kept", got.GetPod().GetMetadata())
		}
	}

	// SyncPod and PlanPod address a pod by its name.
	refused := func(err error) {
		t.Helper()
		wantError(t, err, codes.InvalidArgument, errorinfo.ReasonInvalidSpec)
		var br *errdetails.BadRequest
		for _, d := range status.Convert(err).Details() {
			if b, ok := d.(*errdetails.BadRequest); ok {
				br = b
			}
		}
		if v := br.GetFieldViolations(); len(v) != 1 || v[0].GetField() != "pod.metadata.generateName" ||
			!regexp.MustCompile(`only by RunPods .*a name generated on every apply would create another pod each time; give metadata.name`).MatchString(v[0].GetDescription()) {
			t.Errorf("violations %v, want pod.metadata.generateName saying why", v)
		}
	}
	refused(syncErr(h, generated()))
	_, err = h.c.PlanPod(h.ctx, &podsyncv1.PlanPodRequest{Pod: generated()})
	refused(err)

	// With a name, the name is the pod's (the API server ignores
	// generateName then).
	named := generated()
	named.Metadata.Name = "web-named"
	if _, res := h.sync(named); res.GetPod().GetName() != "web-named" {
		t.Errorf("synced %v, want web-named", res.GetPod())
	}
}
