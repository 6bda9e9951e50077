package logx_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/logx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFromAddsTheRequestScope(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	base := zap.New(core).Named("engine")
	ctx := logx.WithFields(context.Background(), zap.String(logx.RequestID, "r1"))
	ctx = logx.WithFields(ctx, zap.String(logx.RPCMethod, "SyncPod"))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}}
	logx.From(ctx, base).Info("pod stored", logx.Pod(pod)...)
	logx.From(context.Background(), base).Info("background")

	entries := logs.AllUntimed()
	if len(entries) != 2 {
		t.Fatalf("got %d lines, want 2", len(entries))
	}
	got := entries[0].ContextMap()
	for k, want := range map[string]string{logx.RequestID: "r1", logx.RPCMethod: "SyncPod", logx.PodNamespace: "ns", logx.PodName: "web", logx.PodUID: "u1"} {
		if got[k] != want {
			t.Errorf("field %s = %v, want %q (fields %v)", k, got[k], want, got)
		}
	}
	if entries[0].LoggerName != "engine" {
		t.Errorf("logger name %q, want the base's", entries[0].LoggerName)
	}
	if f := entries[1].ContextMap(); len(f) != 0 {
		t.Errorf("a line without a request carries %v", f)
	}
	// WithFields does not change the context it extends.
	parent := logx.WithFields(context.Background(), zap.String("a", "1"))
	_ = logx.WithFields(parent, zap.String("b", "2"))
	if n := len(logx.Fields(parent)); n != 1 {
		t.Errorf("parent has %d fields after a child was made, want 1", n)
	}
}
