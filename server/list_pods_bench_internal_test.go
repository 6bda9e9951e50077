package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/store"
)

// storedPodsService returns the service of a Node that is not running, on
// a store holding n running single-container pods named pod-000… in
// namespace "bench", as podsyncd holds them after RunPods (defaulted spec,
// running status). The reads (GetPod, ListPods) need no running Node; no
// pod has a sandbox.
func storedPodsService(tb testing.TB, n int) (*service, *store.Store) {
	tb.Helper()
	st, err := store.Open(filepath.Join(tb.TempDir(), "podsync.db"), store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	rt := enginetest.NewRuntime()
	node, err := engine.NewNode(engine.NodeOptions{Runtime: rt, Images: rt, Store: st,
		Config: criconfig.Options{RootDir: tb.TempDir(), PodLogDir: tb.TempDir()}})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("pod-%03d", i),
				Labels: map[string]string{"app": "bench"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "main", Image: "registry.local/busybox:1",
				Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
			}}},
		}
		convert.Default(pod)
		if _, err := st.Put(store.PodRecord{Pod: pod}); err != nil {
			tb.Fatal(err)
		}
		if _, err := st.Append(store.StatusChange(store.RefOf(pod), runningStatus(pod, 0))); err != nil {
			tb.Fatal(err)
		}
	}
	svc, ok := NewService(ServiceOptions{Backend: BackendOf(node), NodeName: "node-1"}).(*service)
	if !ok {
		tb.Fatal("NewService: not a *service")
	}
	return svc, st
}

// runningStatus is the status the engine computes for pod with every
// container running, restarted restarts times.
func runningStatus(pod *corev1.Pod, restarts int32) *corev1.PodStatus {
	start := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	st := &corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: "192.0.2.10", HostIPs: []corev1.HostIP{{IP: "192.0.2.10"}},
		PodIP: "10.88.0.5", PodIPs: []corev1.PodIP{{IP: "10.88.0.5"}}, StartTime: &start,
		QOSClass: corev1.PodQOSBestEffort, ObservedGeneration: 1,
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized,
		corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: ct, Status: corev1.ConditionTrue, LastTransitionTime: start})
	}
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Ready: true, Started: new(true), Image: c.Image, ImageID: "registry.local/busybox@sha256:0123",
			ContainerID: "containerd://0123456789abcdef", RestartCount: restarts,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}},
		})
	}
	return st
}

// BenchmarkListPods200 is podsyncd's part of a ListPods of 200 pods: the
// handler and the marshalling of its response by the server's codec,
// which gRPC does next.
func BenchmarkListPods200(b *testing.B) {
	svc, _ := storedPodsService(b, 200)
	codec := newPodCodec(svc)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := svc.ListPods(ctx, &podsyncv1.ListPodsRequest{})
		if err != nil || len(resp.GetPods()) != 200 {
			b.Fatalf("ListPods: %d pods, %v", len(resp.GetPods()), err)
		}
		data, err := codec.Marshal(resp)
		if err != nil {
			b.Fatal(err)
		}
		data.Free()
	}
}

// BenchmarkGetPod200 is podsyncd's part of a GetPod among 200 pods, with
// the marshalling of its response by the server's codec.
func BenchmarkGetPod200(b *testing.B) {
	svc, _ := storedPodsService(b, 200)
	codec := newPodCodec(svc)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		resp, err := svc.GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: "bench", Name: fmt.Sprintf("pod-%03d", i%200)})
		if err != nil {
			b.Fatal(err)
		}
		data, err := codec.Marshal(resp)
		if err != nil {
			b.Fatal(err)
		}
		data.Free()
		i++
	}
}

// BenchmarkGetPod200Served is a GetPod among 200 pods through the whole
// server — the interceptors (recovery, request scope, logging at info,
// metrics, authorization; no read rate limit, as make bench sets it) and the transport — from a client
// on a unix socket, as the API section of make bench calls it. Profile
// it to see the interceptors' share.
func BenchmarkGetPod200Served(b *testing.B) {
	svc, _ := storedPodsService(b, 200)
	// podsyncd's logger: JSON at info, as the daemon makes it.
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
	srv, err := New(Options{Service: svc, Logger: log, Registerer: prometheus.NewRegistry(),
		RateLimit: RateLimit{Read: ReadRateLimit{PerSecond: -1}}})
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-served; err != nil {
			b.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	c := podsyncv1.NewPodSyncServiceClient(conn)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := c.GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: "bench", Name: fmt.Sprintf("pod-%03d", i%200)}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
