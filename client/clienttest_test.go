package client_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/internal/testing/testdaemon"
)

// testImage is held by every fake runtime.
const testImage = testdaemon.Image

// daemon is an in-process podsyncd (internal/testing/testdaemon) with faults to
// inject in front of its service.
type daemon struct {
	*testdaemon.Daemon
	faults *faults
	// bufconn: the daemon serves the bare service in memory, and
	// client(t) wraps its Conn.
	bufconn bool
}

// startDaemon starts a daemon whose service is behind faults; Close stops
// it and removes its files.
func startDaemon(o testdaemon.Options) (*daemon, error) {
	d := &daemon{bufconn: o.Transport == testdaemon.Bufconn}
	o.Wrap = func(svc podsyncv1.PodSyncServiceServer) podsyncv1.PodSyncServiceServer {
		d.faults = &faults{PodSyncServiceServer: svc, cancels: map[*int]context.CancelFunc{}}
		return d.faults
	}
	var err error
	if d.Daemon, err = testdaemon.Start(o); err != nil {
		return nil, err
	}
	return d, nil
}

// newDaemon starts a daemon that logs to t and stops with the test; its
// options (a unix socket whose caller is admin by default) are adjusted
// by mutate.
func newDaemon(t *testing.T, mutate ...func(*testdaemon.Options)) *daemon {
	t.Helper()
	o := testdaemon.Options{Logger: zaptest.NewLogger(t)}
	for _, m := range mutate {
		m(&o)
	}
	d, err := startDaemon(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("stop daemon: %v", err)
		}
	})
	return d
}

// client returns a Client of the daemon, closed with the test.
func (d *daemon) client(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	if d.bufconn {
		return client.NewFromConn(d.Conn, opts...)
	}
	c, err := client.New(t.Context(), d.Target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testContext is a context for one test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testPod is a one-container core/v1 pod that runs until stopped; its
// container prints "hello <name>" when it starts.
func testPod(namespace, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: testImage, Command: []string{"sh", "-c", "echo hello " + name + "; sleep inf"},
		}}},
	}
}

// syncReq is a SyncPod request of testPod.
func syncReq(t *testing.T, namespace, name string, labels map[string]string) *podsyncv1.SyncPodRequest {
	t.Helper()
	req, err := client.SyncPodRequestFromPod(testPod(namespace, name, labels), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// syncPod syncs testPod and returns the result.
func syncPod(t *testing.T, c *client.Client, namespace, name string, labels map[string]string) *podsyncv1.SyncPodResult {
	t.Helper()
	res, err := c.SyncPod(testContext(t), syncReq(t, namespace, name, labels), nil)
	if err != nil {
		t.Fatalf("SyncPod %s/%s: %v", namespace, name, err)
	}
	return res
}

// deletePod deletes a pod at once.
func deletePod(t *testing.T, c *client.Client, namespace, name string) {
	t.Helper()
	grace := int64(0)
	if _, err := c.DeletePod(testContext(t), &podsyncv1.DeletePodRequest{Namespace: namespace, Name: name, GracePeriodSeconds: &grace}); err != nil {
		t.Fatalf("DeletePod %s/%s: %v", namespace, name, err)
	}
}

// faults wraps the real service to inject failures: the first calls of
// GetPod or RunPods fail with UNAVAILABLE, and WatchPods streams can be
// cut after a number of messages, cut on demand, or refused.
type faults struct {
	podsyncv1.PodSyncServiceServer

	failGetPod  atomic.Int32 // GetPod calls still to fail, with getPodErr
	getPodErr   atomic.Pointer[error]
	getPodCalls atomic.Int32
	failRunPods atomic.Int32
	runCalls    atomic.Int32

	mu sync.Mutex
	// cutAfter, if above 0, makes each WatchPods stream fail with
	// UNAVAILABLE instead of sending its message cutAfter+1.
	cutAfter int
	// refuse, if set, is the error of every new WatchPods stream, or of
	// the next refuseNext ones when that is above 0.
	refuse     error
	refuseNext int
	// cutErr is the error a cut stream ends with: errCut (UNAVAILABLE)
	// unless set; errCleanEnd ends it with OK.
	cutErr error
	// watchReqs are the requests of the WatchPods streams, in order.
	watchReqs []*podsyncv1.WatchPodsRequest
	cancels   map[*int]context.CancelFunc
	cuts      int
}

// errCut is the status of a stream the faults cut.
var errCut = status.Error(codes.Unavailable, "stream cut by the test")

func (f *faults) GetPod(ctx context.Context, req *podsyncv1.GetPodRequest) (*podsyncv1.GetPodResponse, error) {
	f.getPodCalls.Add(1)
	if f.failGetPod.Add(-1) >= 0 {
		if err := f.getPodErr.Load(); err != nil {
			return nil, *err
		}
		return nil, status.Error(codes.Unavailable, "injected")
	}
	return f.PodSyncServiceServer.GetPod(ctx, req)
}

func (f *faults) RunPods(req *podsyncv1.RunPodsRequest, stream grpc.ServerStreamingServer[podsyncv1.RunPodsResponse]) error {
	f.runCalls.Add(1)
	if f.failRunPods.Add(-1) >= 0 {
		return status.Error(codes.Unavailable, "injected")
	}
	return f.PodSyncServiceServer.RunPods(req, stream)
}

func (f *faults) WatchPods(req *podsyncv1.WatchPodsRequest, stream grpc.ServerStreamingServer[podsyncv1.WatchPodsResponse]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	id := new(int)
	f.mu.Lock()
	f.watchReqs = append(f.watchReqs, req)
	refuse, cutAfter := f.refuse, f.cutAfter
	if f.refuseNext > 0 {
		if f.refuseNext--; f.refuseNext == 0 {
			f.refuse = nil
		}
	}
	if refuse == nil {
		f.cancels[id] = cancel
	}
	f.mu.Unlock()
	if refuse != nil {
		return refuse
	}
	defer func() {
		f.mu.Lock()
		delete(f.cancels, id)
		f.mu.Unlock()
	}()
	cs := &cutStream{ServerStreamingServer: stream, ctx: ctx, f: f, after: cutAfter}
	err := f.PodSyncServiceServer.WatchPods(req, cs)
	if cs.cut || (ctx.Err() != nil && stream.Context().Err() == nil) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case f.cutErr == nil:
			return errCut
		case errors.Is(f.cutErr, errCleanEnd):
			return nil
		}
		return f.cutErr
	}
	return err
}

// errCleanEnd, as faults.cutErr, ends cut streams with OK.
var errCleanEnd = errors.New("end the stream with OK")

func (f *faults) setCutErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutErr = err
}

// cut ends every open WatchPods stream with UNAVAILABLE.
func (f *faults) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cancel := range f.cancels {
		cancel()
		f.cuts++
	}
}

func (f *faults) setCutAfter(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutAfter = n
}

// setRefuse refuses new WatchPods streams with err (nil: none), all of
// them if n is 0, else the next n.
func (f *faults) setRefuse(err error, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse, f.refuseNext = err, n
}

// watchRequests returns the requests of the WatchPods streams so far.
func (f *faults) watchRequests() []*podsyncv1.WatchPodsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*podsyncv1.WatchPodsRequest(nil), f.watchReqs...)
}

func (f *faults) cutCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cuts
}

// cutStream is a WatchPods stream with the context of faults, which fails
// instead of sending message after+1.
type cutStream struct {
	grpc.ServerStreamingServer[podsyncv1.WatchPodsResponse]
	ctx   context.Context
	f     *faults
	after int
	sent  int
	cut   bool
}

func (s *cutStream) Context() context.Context { return s.ctx }

func (s *cutStream) Send(m *podsyncv1.WatchPodsResponse) error {
	if s.after > 0 && s.sent == s.after {
		s.cut = true
		s.f.mu.Lock()
		s.f.cuts++
		s.f.mu.Unlock()
		return errCut
	}
	s.sent++
	return s.ServerStreamingServer.Send(m)
}
