package daemon

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// captureStderr runs f with os.Stderr redirected and returns what was
// written to it.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	orig := os.Stderr
	os.Stderr = w
	defer func() { os.Stderr = orig }()
	f()
	_ = w.Close()
	out, err := io.ReadAll(r)
	_ = r.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestKlogToZap: klog's lines, contextual (cri-client's) and legacy, end
// up as structured zap lines of the "cri" logger at the mapped levels, and
// klog writes nothing to stderr itself.
func TestKlogToZap(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	stop := routeKlog(zap.New(core, zap.AddCaller()).Named("cri"))
	ctx := context.Background()
	notFound := status.Error(codes.NotFound, `container "abc" not found`)

	stderr := captureStderr(t, func() {
		// What cri-client logs, as it logs it.
		logger := klog.FromContext(ctx)
		logger.Error(notFound, "ContainerStatus from runtime service failed", "containerID", "abc")
		logger.V(10).Info("[RemoteRuntimeService] ContainerStatus", "containerID", "abc", "timeout", "2m0s")
		logger.V(1).Info("verbose detail")
		logger.WithName("remote").WithValues("endpoint", "unix:///run/containerd/containerd.sock").
			Info("StreamContainers not implemented, falling back to ListContainers")
		// Legacy klog calls.
		klog.InfoS("legacy structured", "pod", "shop/web")
		klog.ErrorS(errors.New("boom"), "legacy error")
		klog.Warning("legacy unstructured")
		klog.V(2).Info("legacy verbose")
		klog.Flush()
	})
	if stderr != "" {
		t.Errorf("klog wrote to stderr:\n%s", stderr)
	}

	type line struct {
		level  zapcore.Level
		logger string
		msg    string
	}
	var got []line
	for _, e := range logs.All() {
		got = append(got, line{e.Level, e.LoggerName, e.Message})
	}
	want := []line{
		{zapcore.DebugLevel, "cri", "ContainerStatus from runtime service failed"},
		{zapcore.DebugLevel, "cri", "verbose detail"},
		{zapcore.InfoLevel, "cri.remote", "StreamContainers not implemented, falling back to ListContainers"},
		{zapcore.InfoLevel, "cri", "legacy structured"},
		{zapcore.DebugLevel, "cri", "legacy error"},
		{zapcore.InfoLevel, "cri", "legacy unstructured"},
	}
	if len(got) != len(want) {
		t.Fatalf("zap lines:\n%+v\nwant:\n%+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	// The fields are zap fields, not text.
	first := logs.All()[0]
	fields := first.ContextMap()
	if fields["containerID"] != "abc" {
		t.Errorf("containerID field = %v, want abc", fields["containerID"])
	}
	if e, _ := fields["error"].(string); !strings.Contains(e, "NotFound") {
		t.Errorf("error field = %v, want the CRI error", fields["error"])
	}
	if !strings.HasSuffix(first.Caller.File, "klog_internal_test.go") {
		t.Errorf("caller = %s, want the line that logged", first.Caller.String())
	}
	if f := logs.All()[2].ContextMap(); f["endpoint"] != "unix:///run/containerd/containerd.sock" {
		t.Errorf("WithValues fields lost: %v", f)
	}

	// At the default level, cri-client's failed calls are not logged.
	infoCore, infoLogs := observer.New(zapcore.InfoLevel)
	stopInfo := routeKlog(zap.New(infoCore).Named("cri"))
	klog.FromContext(ctx).Error(notFound, "ContainerStatus from runtime service failed", "containerID", "abc")
	if n := infoLogs.Len(); n != 0 {
		t.Errorf("at info, %d lines of a failed call: %v", n, infoLogs.All())
	}
	stopInfo()

	// Once no run routes klog, its lines go nowhere.
	stop()
	before := logs.Len()
	stderr = captureStderr(t, func() {
		klog.FromContext(ctx).Info("after the run")
		klog.InfoS("after the run")
		klog.Flush()
	})
	if logs.Len() != before || stderr != "" {
		t.Errorf("after stop: %d new zap lines, stderr %q; want none", logs.Len()-before, stderr)
	}
}
