//go:build integration

package cli_test

import (
	"context"
	"testing"
	"time"

	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/otlptest"
)

// TestSyncTrace: with OTEL_EXPORTER_OTLP_ENDPOINT set, podsyncctl sync
// against podsyncd on containerd is one trace: the command, the SDK's
// client span, podsyncd's server span, the sync pass with its steps, and
// the CRI calls, each carrying the trace on to containerd.
func TestSyncTrace(t *testing.T) {
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Stop()
	for k, v := range rcv.Env() {
		t.Setenv(k, v) // podsyncd and podsyncctl inherit them
	}
	d := startPodsyncd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: traced}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n" +
		"  - name: app\n    image: " + localcri.BusyboxImage + "\n    command: [sh, -c, \"trap 'exit 0' TERM; while true; do sleep 1; done\"]\n"
	if r := d.ctl(ctx, pod, "sync", "-f", "-"); r.code != 0 {
		t.Fatalf("podsyncctl sync: %+v", r)
	}
	spans, err := rcv.WaitFor(ctx, func(s []otlptest.Span) bool {
		return len(otlptest.Named(s, "podsyncctl sync")) == 1 && len(otlptest.Named(s, "sync pass")) > 0 &&
			len(otlptest.Named(s, "runtime.v1.RuntimeService/StartContainer")) > 0
	})
	if err != nil {
		t.Fatal(err)
	}
	root := otlptest.Named(spans, "podsyncctl sync")[0]
	tr := otlptest.Trace(spans, root.TraceID)
	t.Logf("trace of podsyncctl sync:\n%s", otlptest.Tree(tr, "k8s.pod.name", "podsync.step.target"))
	byID := map[string]otlptest.Span{}
	for _, s := range tr {
		byID[s.SpanID] = s
	}
	pass := otlptest.Named(tr, "sync pass")
	if len(pass) != 1 {
		t.Fatalf("%d sync passes in the command's trace, want 1", len(pass))
	}
	srv := byID[pass[0].ParentID]
	if srv.Name != "podsync.v1.PodSyncService/SyncPod" || srv.Kind != "server" || srv.Service != "podsyncd" {
		t.Fatalf("the pass's parent: %+v, want podsyncd's SyncPod server span", srv)
	}
	for _, name := range []string{"CreatePodSandbox", "StartContainer", "runtime.v1.RuntimeService/RunPodSandbox", "runtime.v1.RuntimeService/CreateContainer",
		"runtime.v1.RuntimeService/StartContainer"} {
		s := otlptest.Named(tr, name)
		if len(s) == 0 || s[0].ParentID != pass[0].SpanID {
			t.Errorf("%s: %+v, want a child of the pass", name, s)
		}
	}
}
