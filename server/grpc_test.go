package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"maps"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testcert"
	"github.com/podsync/podsync/logx"
	"github.com/podsync/podsync/server"
)

// testService stands in for the real PodSyncService: GetPod answers (or
// panics for the name "panic", fails with NOT_FOUND for "missing" and
// with UNAVAILABLE after 50 ms for "slow-unavailable"), SyncPod sends one response (or, with
// block, waits for release or its context), WatchPods waits for its
// context (or panics for the namespace "panic").
type testService struct {
	podsyncv1.UnimplementedPodSyncServiceServer
	block   bool
	release chan struct{}
	started chan string
	calls   atomic.Int32
}

var _ podsyncv1.PodSyncServiceServer = (*testService)(nil)

func newTestService() *testService {
	return &testService{release: make(chan struct{}), started: make(chan string, 16)}
}

func (s *testService) GetPod(_ context.Context, req *podsyncv1.GetPodRequest) (*podsyncv1.GetPodResponse, error) {
	s.calls.Add(1)
	switch req.GetName() {
	case "panic":
		panic("boom")
	case "missing":
		return nil, status.Error(codes.NotFound, "no such pod")
	case "slow-unavailable":
		time.Sleep(50 * time.Millisecond)
		return nil, status.Error(codes.Unavailable, "runtime down")
	}
	return &podsyncv1.GetPodResponse{}, nil
}

func (s *testService) SyncPod(_ *podsyncv1.SyncPodRequest, stream grpc.ServerStreamingServer[podsyncv1.SyncPodResponse]) error {
	s.calls.Add(1)
	if s.block {
		s.started <- "SyncPod"
		select {
		case <-s.release:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
	return stream.Send(&podsyncv1.SyncPodResponse{})
}

func (s *testService) WatchPods(req *podsyncv1.WatchPodsRequest, stream grpc.ServerStreamingServer[podsyncv1.WatchPodsResponse]) error {
	s.calls.Add(1)
	if req.GetNamespace() == "panic" {
		panic("boom in a stream")
	}
	s.started <- "WatchPods"
	<-stream.Context().Done()
	return stream.Context().Err()
}

// harness is a running server.
type harness struct {
	srv  *server.Server
	svc  *testService
	logs *observer.ObservedLogs
	reg  *prometheus.Registry
}

// start serves opts on l until the test ends. Service defaults to a
// testService; Logger and Registerer are always the harness's, its log
// at debug.
func start(t *testing.T, opts server.Options, l net.Listener) *harness {
	t.Helper()
	return startLogging(t, opts, l, zapcore.DebugLevel)
}

// startLogging is start with the harness's log at level.
func startLogging(t *testing.T, opts server.Options, l net.Listener, level zapcore.Level) *harness {
	t.Helper()
	core, logs := observer.New(level)
	h := &harness{logs: logs, reg: prometheus.NewRegistry()}
	if opts.Service == nil {
		opts.Service = newTestService()
	}
	h.svc, _ = opts.Service.(*testService)
	opts.Logger = zap.New(core)
	opts.Registerer = h.reg
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return h
}

func unixListener(t *testing.T) (net.Listener, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return l, path
}

func tcpListener(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func dial(t *testing.T, target string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// serveUnix starts a server on a unix socket and returns a client.
func serveUnix(t *testing.T, opts server.Options) (*harness, podsyncv1.PodSyncServiceClient, *grpc.ClientConn) {
	t.Helper()
	l, path := unixListener(t)
	h := start(t, opts, l)
	conn := dial(t, "unix://"+path, insecure.NewCredentials())
	return h, podsyncv1.NewPodSyncServiceClient(conn), conn
}

// waitFor polls cond until it holds, for at most 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func callGetPod(ctx context.Context, c podsyncv1.PodSyncServiceClient, name string, opts ...grpc.CallOption) error {
	_, err := c.GetPod(ctx, &podsyncv1.GetPodRequest{Name: name}, opts...)
	return err
}

// callSyncPod runs a SyncPod stream to its end.
func callSyncPod(ctx context.Context, c podsyncv1.PodSyncServiceClient) error {
	stream, err := c.SyncPod(ctx, &podsyncv1.SyncPodRequest{})
	if err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// wantError checks an error's code and ErrorInfo reason ("" for none).
func wantError(t *testing.T, err error, code codes.Code, reason string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("code %v (%v), want %v", st.Code(), err, code)
	}
	var got string
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			got = ei.GetReason()
			if ei.GetDomain() != errorinfo.Domain {
				t.Errorf("ErrorInfo domain %q, want %q", ei.GetDomain(), errorinfo.Domain)
			}
		}
	}
	if got != reason {
		t.Fatalf("ErrorInfo reason %q (%v), want %q", got, err, reason)
	}
}

func TestUnixPeerRootIsAdminByDefault(t *testing.T) {
	if uid := os.Geteuid(); uid != 0 {
		t.Fatalf("this test runs as root (uid 0), not uid %d", uid)
	}
	ctx := testContext(t)
	h, c, _ := serveUnix(t, server.Options{})
	if err := callSyncPod(ctx, c); err != nil {
		t.Fatalf("SyncPod as root: %v", err)
	}
	if err := callGetPod(ctx, c, "web"); err != nil {
		t.Fatalf("GetPod as root: %v", err)
	}
	for _, e := range h.logs.FilterMessage("finished call").All() {
		if id := e.ContextMap()["identity"]; !strings.HasPrefix(id.(string), "uid:0") {
			t.Errorf("identity %q, want uid:0…", id)
		}
		if role := e.ContextMap()["role"]; role != "admin" {
			t.Errorf("role %q, want admin", role)
		}
	}
}

func TestUnixPeerReadOnly(t *testing.T) {
	ctx := testContext(t)
	h, c, _ := serveUnix(t, server.Options{Roles: server.Roles{Read: []string{"uid:0"}}})
	if err := callGetPod(ctx, c, "web"); err != nil {
		t.Fatalf("GetPod: %v", err)
	}
	wantError(t, callSyncPod(ctx, c), codes.PermissionDenied, errorinfo.ReasonPermissionDenied)
	_, err := c.DeletePod(ctx, &podsyncv1.DeletePodRequest{Name: "web"})
	wantError(t, err, codes.PermissionDenied, errorinfo.ReasonPermissionDenied)
	if n := h.svc.calls.Load(); n != 1 {
		t.Errorf("the service saw %d calls, want 1 (GetPod)", n)
	}
}

func TestMTLS(t *testing.T) {
	ca := testcert.NewCA(t, "podsync test CA")
	other := testcert.NewCA(t, "another CA")
	serverCert := ca.Issue(t, testcert.Leaf{CN: "podsyncd", IPs: testcert.Localhost, Server: true})
	l := tcpListener(t)
	h := start(t, server.Options{
		TLS: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{serverCert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    ca.Pool(),
		},
		Roles: server.Roles{
			Admin: []string{"cn:admin"},
			Read:  []string{"dns:reader.podsync.test", "uri:spiffe://podsync.test/observer"},
		},
	}, l)

	client := func(t *testing.T, certs ...tls.Certificate) podsyncv1.PodSyncServiceClient {
		creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(), Certificates: certs})
		return podsyncv1.NewPodSyncServiceClient(dial(t, l.Addr().String(), creds))
	}
	refused := func(t *testing.T, c podsyncv1.PodSyncServiceClient) {
		t.Helper()
		before := h.svc.calls.Load()
		handshakes := h.logs.FilterMessage("tls handshake refused").Len()
		wantError(t, callGetPod(testContext(t), c, "web"), codes.Unavailable, "")
		if h.svc.calls.Load() != before {
			t.Error("the service was called")
		}
		// The refusal is the server's handshake, not a network accident.
		waitFor(t, "the handshake refusal logged", func() bool {
			return h.logs.FilterMessage("tls handshake refused").Len() > handshakes
		})
	}

	t.Run("no client certificate", func(t *testing.T) {
		refused(t, client(t))
	})
	t.Run("certificate of another CA", func(t *testing.T) {
		refused(t, client(t, other.Issue(t, testcert.Leaf{CN: "admin"})))
	})
	t.Run("expired certificate", func(t *testing.T) {
		refused(t, client(t, ca.Issue(t, testcert.Leaf{
			CN: "admin", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour),
		})))
	})
	t.Run("plaintext", func(t *testing.T) {
		c := podsyncv1.NewPodSyncServiceClient(dial(t, l.Addr().String(), insecure.NewCredentials()))
		refused(t, c)
	})
	t.Run("unknown identity", func(t *testing.T) {
		c := client(t, ca.Issue(t, testcert.Leaf{CN: "stranger"}))
		wantError(t, callGetPod(testContext(t), c, "web"), codes.PermissionDenied, errorinfo.ReasonPermissionDenied)
	})
	t.Run("read identity by DNS SAN", func(t *testing.T) {
		ctx := testContext(t)
		c := client(t, ca.Issue(t, testcert.Leaf{CN: "someone", DNSNames: []string{"reader.podsync.test"}}))
		if err := callGetPod(ctx, c, "web"); err != nil {
			t.Fatalf("GetPod: %v", err)
		}
		wantError(t, callSyncPod(ctx, c), codes.PermissionDenied, errorinfo.ReasonPermissionDenied)
	})
	t.Run("read identity by URI SAN", func(t *testing.T) {
		ctx := testContext(t)
		c := client(t, ca.Issue(t, testcert.Leaf{URIs: []string{"spiffe://podsync.test/observer"}}))
		if err := callGetPod(ctx, c, "web"); err != nil {
			t.Fatalf("GetPod: %v", err)
		}
		wantError(t, callSyncPod(ctx, c), codes.PermissionDenied, errorinfo.ReasonPermissionDenied)
	})
	t.Run("admin identity", func(t *testing.T) {
		c := client(t, ca.Issue(t, testcert.Leaf{CN: "admin"}))
		if err := callSyncPod(testContext(t), c); err != nil {
			t.Fatalf("SyncPod: %v", err)
		}
		var found bool
		for _, e := range h.logs.FilterMessage("finished call").All() {
			m := e.ContextMap()
			if m["rpc_method"] == podsyncv1.PodSyncService_SyncPod_FullMethodName && m["identity"] == "cn:admin" && m["grpc_code"] == "OK" {
				found = true
			}
		}
		if !found {
			t.Error("no log line of the admin's SyncPod with identity cn:admin")
		}
	})
}

func TestPlaintextTCP(t *testing.T) {
	t.Run("refused without the loopback exception", func(t *testing.T) {
		l := tcpListener(t)
		h := start(t, server.Options{}, l)
		c := podsyncv1.NewPodSyncServiceClient(dial(t, l.Addr().String(), insecure.NewCredentials()))
		wantError(t, callGetPod(testContext(t), c, "web"), codes.Unavailable, "")
		if h.svc.calls.Load() != 0 {
			t.Error("the service was called")
		}
	})
	t.Run("loopback caller without a role", func(t *testing.T) {
		l := tcpListener(t)
		start(t, server.Options{InsecureLoopback: true}, l)
		c := podsyncv1.NewPodSyncServiceClient(dial(t, l.Addr().String(), insecure.NewCredentials()))
		wantError(t, callGetPod(testContext(t), c, "web"), codes.Unauthenticated, errorinfo.ReasonUnauthenticated)
	})
	t.Run("loopback caller granted read", func(t *testing.T) {
		ctx := testContext(t)
		l := tcpListener(t)
		start(t, server.Options{InsecureLoopback: true, Roles: server.Roles{Read: []string{server.Anonymous}}}, l)
		c := podsyncv1.NewPodSyncServiceClient(dial(t, l.Addr().String(), insecure.NewCredentials()))
		if err := callGetPod(ctx, c, "web"); err != nil {
			t.Fatalf("GetPod: %v", err)
		}
		wantError(t, callSyncPod(ctx, c), codes.PermissionDenied, errorinfo.ReasonPermissionDenied)
	})
}

func TestPanicBecomesInternal(t *testing.T) {
	ctx := testContext(t)
	h, c, _ := serveUnix(t, server.Options{})

	wantError(t, callGetPod(ctx, c, "panic"), codes.Internal, errorinfo.ReasonInternal)
	stream, err := c.WatchPods(ctx, &podsyncv1.WatchPodsRequest{Namespace: "panic"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantError(t, err, codes.Internal, errorinfo.ReasonInternal)

	if err := callGetPod(ctx, c, "web"); err != nil {
		t.Fatalf("GetPod after the panics: %v", err)
	}
	panics := h.logs.FilterMessage("panic in call").All()
	if len(panics) != 2 {
		t.Fatalf("%d panic lines, want 2", len(panics))
	}
	for _, e := range panics {
		m := e.ContextMap()
		if stack, _ := m["stack"].(string); !strings.Contains(stack, "testService") {
			t.Errorf("stack does not show the handler:\n%s", stack)
		}
		if m["request_id"] == nil || m["rpc_method"] == nil {
			t.Errorf("panic line without the request's fields: %v", m)
		}
	}
	var internal int
	for _, e := range h.logs.FilterMessage("finished call").All() {
		if e.ContextMap()["grpc_code"] == codes.Internal.String() {
			internal++
		}
	}
	if internal != 2 {
		t.Errorf("%d finished calls with code Internal, want 2", internal)
	}
}

func TestLoggingOneLinePerCall(t *testing.T) {
	ctx := testContext(t)
	h, c, _ := serveUnix(t, server.Options{Roles: server.Roles{Read: []string{"uid:0"}}})

	var header metadata.MD
	// The caller's trace id is on the line of its call.
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	traced := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if err := callGetPod(traced, c, "web", grpc.Header(&header)); err != nil {
		t.Fatal(err)
	}
	wantError(t, callSyncPod(ctx, c), codes.PermissionDenied, errorinfo.ReasonPermissionDenied)

	lines := h.logs.All()
	if len(lines) != 2 {
		for _, l := range lines {
			t.Logf("%s %v", l.Message, l.ContextMap())
		}
		t.Fatalf("%d log lines for 2 calls, want 2", len(lines))
	}
	get, sync := lines[0].ContextMap(), lines[1].ContextMap()
	for _, tt := range []struct {
		m      map[string]any
		method string
		code   codes.Code
	}{
		{get, podsyncv1.PodSyncService_GetPod_FullMethodName, codes.OK},
		{sync, podsyncv1.PodSyncService_SyncPod_FullMethodName, codes.PermissionDenied},
	} {
		if tt.m["rpc_method"] != tt.method || tt.m["grpc_code"] != tt.code.String() {
			t.Errorf("rpc_method %v grpc_code %v, want %s %v", tt.m["rpc_method"], tt.m["grpc_code"], tt.method, tt.code)
		}
		if id, _ := tt.m["identity"].(string); !strings.HasPrefix(id, "uid:0") {
			t.Errorf("identity %q, want uid:0…", id)
		}
		if _, ok := tt.m["duration"].(time.Duration); !ok {
			t.Errorf("duration %#v, want a time.Duration", tt.m["duration"])
		}
		if id, _ := tt.m["request_id"].(string); id == "" {
			t.Error("no request_id")
		}
	}
	if ids := header.Get(server.RequestIDHeader); len(ids) != 1 || ids[0] != get["request_id"] {
		t.Errorf("x-request-id %v, want the logged request_id %v", ids, get["request_id"])
	}
	if get["trace_id"] != traceID {
		t.Errorf("trace_id %v, want the caller's %s", get["trace_id"], traceID)
	}
	if get["request_id"] == sync["request_id"] {
		t.Error("two calls share a request_id")
	}
	if _, ok := sync["error"]; !ok {
		t.Error("the failed call's line has no error")
	}
}

// metricValue returns the value of the counter, or the sample count of
// the histogram, name with labels.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metrics
				}
			}
			return metricOf(m)
		}
	}
	return 0
}

func metricOf(m *dto.Metric) float64 {
	if m.GetHistogram() != nil {
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetCounter().GetValue()
}

func TestMetrics(t *testing.T) {
	ctx := testContext(t)
	h, c, _ := serveUnix(t, server.Options{})
	getOK := map[string]string{"grpc_method": "GetPod", "grpc_code": "OK"}
	if v := metricValue(t, h.reg, "grpc_server_handled_total", getOK); v != 0 {
		t.Fatalf("handled before any call: %v", v)
	}
	for range 3 {
		if err := callGetPod(ctx, c, "web"); err != nil {
			t.Fatal(err)
		}
	}
	if err := callSyncPod(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"grpc_server_handled_total", getOK, 3},
		{"grpc_server_started_total", map[string]string{"grpc_method": "SyncPod"}, 1},
		{"grpc_server_handled_total", map[string]string{"grpc_method": "SyncPod", "grpc_code": "OK"}, 1},
		{"grpc_server_msg_sent_total", map[string]string{"grpc_method": "SyncPod"}, 1},
		{"grpc_server_handling_seconds", map[string]string{"grpc_method": "GetPod"}, 3},
	} {
		if got := metricValue(t, h.reg, tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}

	rec := httptest.NewRecorder()
	server.MetricsHandler(h.reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if body := rec.Body.String(); !strings.Contains(body, `grpc_server_handled_total{grpc_code="OK",grpc_method="GetPod"`) {
		t.Errorf("/metrics lacks GetPod's counter:\n%.2000s", body)
	}
}

func TestRateLimit(t *testing.T) {
	ctx := testContext(t)
	_, c, _ := serveUnix(t, server.Options{RateLimit: server.RateLimit{PerSecond: 0.001, Burst: 2}})
	for i := range 2 {
		if err := callSyncPod(ctx, c); err != nil {
			t.Fatalf("SyncPod %d within the burst: %v", i, err)
		}
	}
	wantError(t, callSyncPod(ctx, c), codes.ResourceExhausted, errorinfo.ReasonRateLimited)
	// Every mutating method draws from the identity's one bucket.
	_, err := c.DeletePod(ctx, &podsyncv1.DeletePodRequest{Name: "web"})
	wantError(t, err, codes.ResourceExhausted, errorinfo.ReasonRateLimited)
	// Reads draw from another bucket.
	for range 5 {
		if err := callGetPod(ctx, c, "web"); err != nil {
			t.Fatalf("GetPod: %v", err)
		}
	}
}

// fakeProbe answers as told.
type fakeProbe struct {
	down  atomic.Bool
	calls atomic.Int32
}

func (p *fakeProbe) called() bool { return p.calls.Load() > 0 }

func (p *fakeProbe) probe(context.Context) error {
	p.calls.Add(1)
	if p.down.Load() {
		return errors.New("connection refused")
	}
	return nil
}

func TestHealthFollowsTheRuntime(t *testing.T) {
	ctx := testContext(t)
	probe := &fakeProbe{}
	probe.down.Store(true)
	hc := server.NewHealthChecker(probe.probe, 5*time.Millisecond, nil)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- hc.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	}()

	_, _, conn := serveUnix(t, server.Options{Health: hc})
	hcl := healthpb.NewHealthClient(conn)
	if err := hc.CheckReady(); status.Code(err) != codes.Unavailable {
		t.Fatalf("CheckReady before the runtime answered: %v, want Unavailable", err)
	}
	wantError(t, hc.CheckReady(), codes.Unavailable, errorinfo.ReasonRuntimeUnavailable)

	// Both names the server answers for follow the probe.
	services := []string{"", "podsync.v1.PodSyncService"}
	watches := make([]healthpb.Health_WatchClient, len(services))
	for i, service := range services {
		w, err := hcl.Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatal(err)
		}
		watches[i] = w
	}
	next := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for i, w := range watches {
			resp, err := w.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetStatus() != want {
				t.Fatalf("service %q: status %v, want %v", services[i], resp.GetStatus(), want)
			}
		}
	}
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	probe.down.Store(false)
	next(healthpb.HealthCheckResponse_SERVING)
	if !hc.Ready() || !hc.Serving() || hc.CheckReady() != nil {
		t.Error("not Ready while SERVING")
	}
	for _, service := range services {
		resp, err := hcl.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q): %v %v, want SERVING", service, resp.GetStatus(), err)
		}
	}
	probe.down.Store(true)
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	if !hc.Ready() {
		t.Error("Ready turned false: it says whether the runtime ever answered")
	}
	probe.down.Store(false)
	next(healthpb.HealthCheckResponse_SERVING)
}

func TestReflectionListsTheService(t *testing.T) {
	ctx := testContext(t)
	_, _, conn := serveUnix(t, server.Options{})
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"podsync.v1.PodSyncService", "grpc.health.v1.Health"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("services %v lack %s", names, want)
		}
	}
	// Without a HealthChecker, health says SERVING.
	hresp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hresp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Check: %v %v, want SERVING", hresp.GetStatus(), err)
	}
}

func waitStarted(t *testing.T, svc *testService, want string) {
	t.Helper()
	select {
	case got := <-svc.started:
		if got != want {
			t.Fatalf("%s started, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not start", want)
	}
}

func TestShutdown(t *testing.T) {
	for _, tt := range []struct {
		name     string
		finish   bool // SyncPod finishes during the grace period
		wantErr  error
		wantSync codes.Code
	}{
		{name: "in-flight sync finishes", finish: true, wantErr: nil, wantSync: codes.OK},
		{name: "in-flight sync canceled at the deadline", finish: false, wantErr: server.ErrCallsCanceled, wantSync: codes.Unavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			svc := newTestService()
			svc.block = true
			h, c, conn := serveUnix(t, server.Options{Service: svc})

			syncDone := make(chan error, 1)
			go func() { syncDone <- callSyncPod(ctx, c) }()
			waitStarted(t, svc, "SyncPod")
			watch, err := c.WatchPods(ctx, &podsyncv1.WatchPodsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			waitStarted(t, svc, "WatchPods")
			hw, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := hw.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health before shutdown: %v %v", resp.GetStatus(), err)
			}

			shutCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- h.srv.Shutdown(shutCtx) }()

			// Observer streams end at once, with a clear status.
			_, err = watch.Recv()
			wantError(t, err, codes.Unavailable, errorinfo.ReasonShuttingDown)
			// Health watchers see NOT_SERVING, or the end of the stream.
			if resp, err := hw.Recv(); err == nil {
				if resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
					t.Errorf("health during shutdown: %v", resp.GetStatus())
				}
			} else {
				wantError(t, err, codes.Unavailable, errorinfo.ReasonShuttingDown)
			}
			select {
			case err := <-syncDone:
				t.Fatalf("SyncPod ended before its grace period: %v", err)
			default:
			}

			if tt.finish {
				close(svc.release)
			}
			err = <-syncDone
			if tt.wantSync == codes.OK {
				if err != nil {
					t.Fatalf("SyncPod: %v", err)
				}
			} else {
				wantError(t, err, tt.wantSync, errorinfo.ReasonShuttingDown)
			}
			if err := <-shut; !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Shutdown: %v, want %v", err, tt.wantErr)
			}
			if shutCtx.Err() != nil {
				t.Error("Shutdown returned after its deadline")
			}
			wantError(t, callGetPod(ctx, c, "web"), codes.Unavailable, "")
		})
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := server.New(server.Options{}); err == nil {
		t.Error("New without a Service: no error")
	}
	if _, err := server.New(server.Options{Service: newTestService(), Roles: server.Roles{Admin: []string{"root"}}}); err == nil {
		t.Error("New with an invalid role entry: no error")
	}
	reg := prometheus.NewRegistry()
	if _, err := server.New(server.Options{Service: newTestService(), Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := server.New(server.Options{Service: newTestService(), Registerer: reg}); err == nil {
		t.Error("New registering the metrics twice: no error")
	}
}

// TestHealthProbeNow: a runtime that connects is probed at once, not at
// the next tick of a long interval.
func TestHealthProbeNow(t *testing.T) {
	ctx := testContext(t)
	probe := &fakeProbe{}
	probe.down.Store(true)
	hc := server.NewHealthChecker(probe.probe, time.Hour, nil)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- hc.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	}()
	for !probe.called() {
		time.Sleep(time.Millisecond)
	}
	probe.down.Store(false)
	hc.ProbeNow()
	deadline := time.Now().Add(5 * time.Second)
	for !hc.Serving() {
		if time.Now().After(deadline) {
			t.Fatal("not SERVING after ProbeNow with an hour's interval")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReadsThatSucceedLogAtDebug: a read that succeeds ends with a debug
// line (clients poll them), a call that changes the node with an info
// line, a read that fails with its failure's level.
func TestReadsThatSucceedLogAtDebug(t *testing.T) {
	ctx := testContext(t)
	h, c, _ := serveUnix(t, server.Options{})
	if err := callGetPod(ctx, c, "web"); err != nil {
		t.Fatal(err)
	}
	if err := callSyncPod(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := callGetPod(ctx, c, "panic"); err == nil {
		t.Fatal("GetPod of panic: no error")
	}
	levels := map[string][]zapcore.Level{}
	for _, e := range h.logs.FilterMessage("finished call").All() {
		m, _ := e.ContextMap()["rpc_method"].(string)
		levels[m] = append(levels[m], e.Level)
	}
	want := map[string][]zapcore.Level{
		podsyncv1.PodSyncService_GetPod_FullMethodName:  {zapcore.DebugLevel, zapcore.ErrorLevel},
		podsyncv1.PodSyncService_SyncPod_FullMethodName: {zapcore.InfoLevel},
	}
	if diff := cmp.Diff(want, levels); diff != "" {
		t.Errorf("levels of finished call lines (-want +got):\n%s", diff)
	}
}

// A Shutdown that comes before Serve has begun (a daemon stopped as soon
// as it started) is a normal end: Serve returns nil at once.
func TestShutdownBeforeServe(t *testing.T) {
	l, _ := unixListener(t)
	srv, err := server.New(server.Options{Service: newTestService(), Logger: zap.NewNop(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(testContext(t)); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
}

// TestReadLinesWithDebugOff: with the log at info, reads that end at the
// middleware's info level (OK, NOT_FOUND) leave no line, as at debug they
// leave a debug line; those that end at warn or error leave the same
// line as with debug on, with the call's own duration.
func TestReadLinesWithDebugOff(t *testing.T) {
	lines := func(level zapcore.Level) []observer.LoggedEntry {
		t.Helper()
		l, path := unixListener(t)
		h := startLogging(t, server.Options{}, l, level)
		c := podsyncv1.NewPodSyncServiceClient(dial(t, "unix://"+path, insecure.NewCredentials()))
		ctx := testContext(t)
		for _, name := range []string{"web", "missing", "slow-unavailable", "panic"} {
			_ = callGetPod(ctx, c, name)
		}
		if err := callSyncPod(ctx, c); err != nil {
			t.Fatal(err)
		}
		return h.logs.FilterMessage("finished call").AllUntimed()
	}
	type line struct {
		level  zapcore.Level
		method string
		code   string
		keys   []string
	}
	summary := func(es []observer.LoggedEntry) []line {
		var out []line
		for _, e := range es {
			m := e.ContextMap()
			if d, _ := m[logx.Duration].(time.Duration); m[logx.GRPCCode] == "Unavailable" && d < 50*time.Millisecond {
				t.Errorf("the Unavailable read's duration is %v, want ≥ 50ms (its handler's)", d)
			}
			keys := slices.Sorted(maps.Keys(m))
			method, _ := m[logx.RPCMethod].(string)
			code, _ := m[logx.GRPCCode].(string)
			out = append(out, line{level: e.Level, method: method, code: code, keys: keys})
		}
		return out
	}
	getPod, syncPod := podsyncv1.PodSyncService_GetPod_FullMethodName, podsyncv1.PodSyncService_SyncPod_FullMethodName
	debug := summary(lines(zapcore.DebugLevel))
	var wantLevels []string
	for _, l := range debug {
		wantLevels = append(wantLevels, l.level.String()+" "+l.method+" "+l.code)
	}
	if diff := cmp.Diff([]string{
		"debug " + getPod + " OK", "debug " + getPod + " NotFound", "warn " + getPod + " Unavailable",
		"error " + getPod + " Internal", "info " + syncPod + " OK",
	}, wantLevels); diff != "" {
		t.Fatalf("lines with debug on (-want +got):\n%s", diff)
	}
	var want []line
	for _, l := range debug {
		if l.level >= zapcore.InfoLevel {
			want = append(want, l)
		}
	}
	if diff := cmp.Diff(want, summary(lines(zapcore.InfoLevel)), cmp.AllowUnexported(line{})); diff != "" {
		t.Errorf("lines with debug off (-want +got):\n%s", diff)
	}
}
