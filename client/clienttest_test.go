package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/runpods"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/server"
)

// testImage is held by every fake runtime.
const testImage = "registry.local/busybox:1"

// daemonConfig configures startDaemon.
type daemonConfig struct {
	// logger receives the node's and the server's logs; nil discards.
	logger *zap.Logger
	// allocatable, if set, is the node's allocatable resources for
	// admission (SyncPod's and RunPods').
	allocatable corev1.ResourceList
	// roles replace the default: the test's uid is admin.
	roles *server.Roles
	// tcp serves on 127.0.0.1 instead of a unix socket: with mutual TLS
	// if tls is set, else plaintext (InsecureLoopback); target is
	// "127.0.0.1:port".
	tcp bool
	tls *tls.Config
	// bufconn serves the bare service (server.NewService behind the
	// error interceptors) on an in-memory listener instead of server.New
	// on a unix socket; the daemon's conn dials it.
	bufconn bool
}

// daemon is an in-process podsyncd: the real PodSyncService on an
// engine.Node on a FakeRuntime with its own store, served by server.New
// on a unix socket (or, with bufconn, by a bare grpc.Server), with faults
// to inject.
type daemon struct {
	// target is the unix socket as a client target, "unix:///…".
	target string
	// conn dials the bufconn listener (bufconn only).
	conn   *grpc.ClientConn
	rt     *enginetest.FakeRuntime
	store  *store.Store
	faults *faults

	closers []func() error
}

// startDaemon starts a daemon; close stops it and removes its files.
func startDaemon(cfg daemonConfig) (d *daemon, err error) {
	d = &daemon{rt: enginetest.NewRuntime(enginetest.WithImages(testImage))}
	defer func() {
		if err != nil {
			_ = d.close()
		}
	}()
	log := cfg.logger
	if log == nil {
		log = zap.NewNop()
	}
	// A short directory: a socket path is limited to 107 bytes.
	dir, err := os.MkdirTemp("", "podsync-client-")
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, func() error { return os.RemoveAll(dir) })
	for _, sub := range []string{"root", "logs"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	if d.store, err = store.Open(filepath.Join(dir, "podsync.db"), store.Options{}); err != nil {
		return nil, err
	}
	d.closers = append(d.closers, d.store.Close)

	nodeCfg := criconfig.Options{RootDir: filepath.Join(dir, "root"), PodLogDir: filepath.Join(dir, "logs"), NodeIPs: []string{"192.0.2.10"}}
	nodeOpts := engine.NodeOptions{Runtime: d.rt, Images: d.rt, Store: d.store, Logger: log.Named("engine"), Config: nodeCfg,
		RelistPeriod: time.Hour, EventedRelistPeriod: time.Hour,
		LogRotation: engine.LogRotation{Period: time.Hour}, GC: engine.GCPolicy{Period: time.Hour}}
	var admission admit.Node
	if cfg.allocatable != nil {
		admission = admit.Node{Allocatable: cfg.allocatable}
		nodeOpts.Admit, nodeOpts.Policy = engine.Admission(admission, admit.Policy{})
	}
	node, err := engine.NewNode(nodeOpts)
	if err != nil {
		return nil, err
	}
	runCtx, stopNode := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- node.Run(runCtx) }()
	d.closers = append(d.closers, func() error {
		stopNode()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	})

	d.faults = &faults{PodSyncServiceServer: server.NewService(server.ServiceOptions{
		Node: node, NodeName: "node-1", Logger: log.Named("service"),
		RunPods: runpods.Options{Admission: admission, PodLogDir: nodeCfg.PodLogDir},
	}), cancels: map[*int]context.CancelFunc{}}

	if cfg.bufconn {
		return d, d.serveBufconn()
	}
	roles := server.Roles{Admin: []string{"uid:" + strconv.Itoa(os.Getuid())}}
	if cfg.roles != nil {
		roles = *cfg.roles
	}
	srv, err := server.New(server.Options{Service: d.faults, Logger: log.Named("server"), Roles: roles,
		TLS: cfg.tls, InsecureLoopback: cfg.tcp && cfg.tls == nil})
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "podsync.sock")
	d.target = "unix://" + sock
	var l net.Listener
	if cfg.tcp {
		l, err = net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			d.target = l.Addr().String()
		}
	} else {
		l, err = net.Listen("unix", sock)
	}
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	d.closers = append(d.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		return errors.Join(err, <-served)
	})
	return d, nil
}

func (d *daemon) serveBufconn() error {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(server.UnaryErrorInterceptor()),
		grpc.ChainStreamInterceptor(server.StreamErrorInterceptor()))
	podsyncv1.RegisterPodSyncServiceServer(srv, d.faults)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	d.closers = append(d.closers, func() error {
		srv.Stop()
		<-served
		return nil
	})
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	d.closers = append(d.closers, conn.Close)
	d.conn = conn
	return nil
}

// close stops what startDaemon started, last first.
func (d *daemon) close() error {
	var errs []error
	for i := len(d.closers) - 1; i >= 0; i-- {
		errs = append(errs, d.closers[i]())
	}
	d.closers = nil
	return errors.Join(errs...)
}

// newDaemon starts a daemon that logs to t and stops with the test.
func newDaemon(t *testing.T, mutate ...func(*daemonConfig)) *daemon {
	t.Helper()
	cfg := daemonConfig{logger: zaptest.NewLogger(t)}
	for _, m := range mutate {
		m(&cfg)
	}
	d, err := startDaemon(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.close(); err != nil {
			t.Errorf("stop daemon: %v", err)
		}
	})
	return d
}

// client returns a Client of the daemon, closed with the test.
func (d *daemon) client(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	if d.conn != nil {
		return client.NewFromConn(d.conn, opts...)
	}
	c, err := client.New(t.Context(), d.target, opts...)
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
