package cli

import (
	"context"
	"testing"
	"time"

	"github.com/podsync/podsync/internal/testing/otlptest"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/internal/tracing"
	"github.com/podsync/podsync/server"
)

// TestSyncTrace: with an OTLP endpoint in the environment, podsyncctl sync
// is one trace: the command's span, the SDK's client span of SyncPod under
// it, podsyncd's server span and its sync pass under that.
func TestSyncTrace(t *testing.T) {
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Stop()
	env := rcv.Env()
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tp, err := tracing.Setup(ctx, "podsyncd", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tp.Shutdown(context.Background()) }()
	d := startPodsyncdWith(t, false, testdaemon.Options{Server: server.Options{TracerProvider: tp}})
	env["PODSYNC_ADDRESS"] = d.address
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n    image: " + testImage + "\n    command: [sleep, inf]\n"
	mustSucceed(t, "sync", runCLI(t, env, pod, "sync", "-f", "-"))
	// Each process exports its spans as they end, in batches: the server
	// span ends after the pass's, and may arrive after it.
	spans, err := rcv.WaitFor(ctx, func(s []otlptest.Span) bool {
		server := false
		for _, sp := range otlptest.Named(s, "podsync.v1.PodSyncService/SyncPod") {
			server = server || sp.Kind == "server"
		}
		return len(otlptest.Named(s, "podsyncctl sync")) == 1 && len(otlptest.Named(s, "sync pass")) > 0 && server
	})
	if err != nil {
		t.Fatal(err)
	}
	root := otlptest.Named(spans, "podsyncctl sync")[0]
	tr := otlptest.Trace(spans, root.TraceID)
	t.Logf("trace:\n%s", otlptest.Tree(tr))
	var client, srv otlptest.Span
	for _, s := range otlptest.Named(tr, "podsync.v1.PodSyncService/SyncPod") {
		switch s.Kind {
		case "client":
			client = s
		case "server":
			srv = s
		}
	}
	pass := otlptest.Named(tr, "sync pass")
	if root.Service != "podsyncctl" || client.ParentID != root.SpanID || srv.ParentID != client.SpanID || len(pass) != 1 || pass[0].ParentID != srv.SpanID {
		t.Fatalf("trace is not command > client > server > pass:\n%s", otlptest.Tree(tr))
	}
}
