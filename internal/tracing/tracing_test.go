package tracing_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/otlptest"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/internal/tracing"
	"github.com/podsync/podsync/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNothingExportedWithoutTheEnvironment: without an OTLP endpoint the
// provider records nothing, but the context still propagates.
func TestNothingExportedWithoutTheEnvironment(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tp, err := tracing.Setup(t.Context(), "podsyncd", "test")
	if err != nil {
		t.Fatal(err)
	}
	if tp.Exporting() {
		t.Fatal("exporting without an endpoint")
	}
	_, span := tp.Tracer("t").Start(t.Context(), "x")
	if span.IsRecording() {
		t.Error("a span records without an endpoint")
	}
	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
	} {
		if tracing.Enabled(func(k string) string { return env[k] }) {
			t.Errorf("%v enables tracing", env)
		}
	}
	if !tracing.Enabled(func(k string) string { return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x"}[k] }) {
		t.Error("a traces endpoint does not enable tracing")
	}
}

// TestSyncPodTrace: an in-process OTLP receiver gets one trace for a
// SyncPod: the caller's, with podsyncd's server span under the caller's
// span, the sync pass under the server span and the pass's steps under
// the pass.
func TestSyncPodTrace(t *testing.T) {
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Stop()
	for k, v := range rcv.Env() {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tp, err := tracing.Setup(ctx, "podsyncd", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tp.Shutdown(context.Background()) }()
	d := testdaemon.New(t, testdaemon.Options{Server: server.Options{TracerProvider: tp}})

	// The caller's trace: a remote parent in W3C traceparent.
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled})
	cctx := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+parent.TraceID().String()+"-"+parent.SpanID().String()+"-01")
	pod, err := convert.PodToProto(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: testdaemon.Image, Command: []string{"sleep", "inf"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := d.Client.SyncPod(cctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	const rpc = "podsync.v1.PodSyncService/SyncPod"
	spans, err := rcv.WaitFor(ctx, func(s []otlptest.Span) bool {
		return len(otlptest.Named(s, rpc)) > 0 && len(otlptest.Named(s, syncer.SpanPass)) > 0 && len(otlptest.Named(s, "StartContainer")) > 0
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := otlptest.Trace(spans, parent.TraceID().String())
	t.Logf("trace:\n%s", otlptest.Tree(tr))
	srv := otlptest.Named(tr, rpc)
	if len(srv) != 1 || srv[0].ParentID != parent.SpanID().String() || srv[0].Kind != "server" || srv[0].Service != "podsyncd" {
		t.Fatalf("server spans of the caller's trace: %+v", srv)
	}
	pass := otlptest.Named(tr, syncer.SpanPass)
	if len(pass) != 1 || pass[0].ParentID != srv[0].SpanID || pass[0].Attributes["k8s.pod.name"] != "web" {
		t.Fatalf("pass spans under the server span: %+v", pass)
	}
	for _, step := range []string{"CreatePodSandbox", "StartContainer"} {
		s := otlptest.Named(tr, step)
		if len(s) != 1 || s[0].ParentID != pass[0].SpanID {
			t.Errorf("%s spans under the pass: %+v", step, s)
		}
	}
	for _, s := range spans {
		if s.TraceID != parent.TraceID().String() && strings.HasPrefix(s.Name, "podsync.v1.") {
			t.Errorf("a call span of another trace: %+v", s)
		}
	}
}
