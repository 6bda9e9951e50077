package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
)

// DefaultMaxRecvMsgSize is the largest message the server receives by
// default: DefaultMaxRequestBytes plus room, so that an oversized request
// meets the validator's INVALID_ARGUMENT (with the field and the limit)
// rather than gRPC's bare RESOURCE_EXHAUSTED.
const DefaultMaxRecvMsgSize = DefaultMaxRequestBytes + 1<<20

// readinessGate is the optional capability of a service to gate its
// calls (Service has it).
type readinessGate interface {
	UnaryReady() grpc.UnaryServerInterceptor
	StreamReady() grpc.StreamServerInterceptor
}

// Options configure New.
type Options struct {
	// Service implements podsync.v1.PodSyncService (NewService). Required.
	// A service with a readiness gate (UnaryReady, StreamReady) gets it
	// installed.
	Service podsyncv1.PodSyncServiceServer
	// Logger is the base logger; each call logs through it with its
	// request-scoped fields. Nil means no logging.
	Logger *zap.Logger
	// Registerer receives the gRPC server metrics. Nil means no metrics.
	Registerer prometheus.Registerer
	// Roles map identities to roles; see Roles for the default.
	Roles Roles
	// TLS configures TCP connections: a server certificate, ClientCAs and
	// tls.RequireAndVerifyClientCert (internal/daemon builds it). Nil
	// means plaintext TCP connections, refused unless InsecureLoopback.
	// Unix socket connections never use TLS.
	TLS *tls.Config
	// InsecureLoopback accepts plaintext TCP connections to a loopback
	// address when TLS is nil (--insecure-listen-loopback; development
	// only). Their callers are "anonymous".
	InsecureLoopback bool
	// RateLimit bounds the mutating calls of each identity, and in
	// another bucket its read calls (RateLimit.Read).
	RateLimit RateLimit
	// Health publishes the runtime's health; the caller runs it. Nil means
	// always SERVING (until Shutdown).
	Health *HealthChecker
	// MaxStreamsPerIdentity bounds the streams (watches, logs, sessions,
	// RunPods, SyncPod, health Watch, reflection) and running ExecSync
	// calls one identity holds open at once; more are refused with
	// RESOURCE_EXHAUSTED (TOO_MANY_STREAMS). Zero means
	// DefaultMaxStreamsPerIdentity.
	MaxStreamsPerIdentity int
	// MaxRecvMsgSize is the largest request accepted, in bytes. Zero
	// means DefaultMaxRecvMsgSize; keep it above the validator's
	// Limits.MaxRequestBytes.
	MaxRecvMsgSize int
	// TracerProvider records a server span per call of the
	// PodSyncService (otelgrpc), child of the caller's W3C trace context;
	// the call's context carries it to the node's passes and CRI calls.
	// Nil records nothing, but the caller's trace context still
	// propagates.
	TracerProvider trace.TracerProvider
}

// Server is podsyncd's gRPC server: the PodSyncService of Options.Service,
// grpc.health.v1 and server reflection, behind transport credentials for
// unix sockets (peer uid) and TCP (mTLS), and these interceptors,
// outermost first:
//
//   - recovery: the last resort for a panic in the interceptors below;
//   - request scope: request_id (also sent as the x-request-id header),
//     the caller's Identity and Role, and a logger with them in ctx
//     (ContextLogger, IdentityFromContext);
//   - logging: one line per call (go-grpc-middleware) with rpc_method,
//     request_id, identity, role, grpc_code, duration and the error;
//   - metrics: go-grpc-middleware's Prometheus server metrics;
//   - recovery: a panic in a handler becomes INTERNAL with reason
//     INTERNAL, logged with its stack; logging and metrics see the call;
//   - authorization: Roles, PERMISSION_DENIED otherwise;
//   - rate limit: mutating calls per identity, and in another bucket
//     read calls and stream openings (PlanPod weighing more),
//     RESOURCE_EXHAUSTED with reason RATE_LIMITED;
//   - shutdown: ends calls that Shutdown interrupts with UNAVAILABLE,
//     reason SHUTTING_DOWN;
//   - readiness: the service's gate (Service's UnaryReady and
//     StreamReady), UNAVAILABLE with reason RUNTIME_UNAVAILABLE until the
//     node runs and its runtime has answered; each call gets the backend
//     current when it arrives;
//   - errors: UnaryErrorInterceptor and StreamErrorInterceptor.
type Server struct {
	grpc  *grpc.Server
	creds *transportCredentials
	// httpGRPC and http serve the calls over HTTP/1.x (http.go).
	httpGRPC *grpc.Server
	http     *http.Server
	health   *health.Server
	log      *zap.Logger
	authz    *authorizer
	limits   *limiters
	reads    *limiters
	readLim  ReadRateLimit
	streams  *streamLimits

	// allCtx ends when Shutdown gives up waiting; observersCtx, its child,
	// when Shutdown starts. Calls end through context.AfterFunc on them.
	allCtx, observersCtx     context.Context
	cancelAll, cancelObserve context.CancelFunc
}

// New returns a Server; it listens on nothing until Serve. It returns an
// error if Service is nil, Roles are invalid or the metrics cannot be
// registered.
func New(opts Options) (*Server, error) {
	if opts.Service == nil {
		return nil, errors.New("server options: Service is required")
	}
	authz, err := newAuthorizer(opts.Roles)
	if err != nil {
		return nil, fmt.Errorf("server options: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{
		log: log, authz: authz,
		limits: newLimiters(opts.RateLimit), reads: newReadLimiters(opts.RateLimit.Read),
		readLim: opts.RateLimit.Read.withDefaults(), streams: newStreamLimits(opts.MaxStreamsPerIdentity),
	}
	s.allCtx, s.cancelAll = context.WithCancel(context.Background())
	s.observersCtx, s.cancelObserve = context.WithCancel(s.allCtx)

	var metrics *grpcprom.ServerMetrics
	if opts.Registerer != nil {
		if metrics, err = newServerMetrics(opts.Registerer); err != nil {
			return nil, err
		}
	}

	recoverOpt := recovery.WithRecoveryHandlerContext(s.recovered)
	logger := interceptorLogger(log)
	unary := []grpc.UnaryServerInterceptor{
		recovery.UnaryServerInterceptor(recoverOpt),
		s.unaryScope,
		quietReads(logging.UnaryServerInterceptor(logger, loggingOptions()...), log),
	}
	stream := []grpc.StreamServerInterceptor{
		recovery.StreamServerInterceptor(recoverOpt),
		s.streamScope,
		logging.StreamServerInterceptor(logger, loggingOptions()...),
	}
	if metrics != nil {
		unary = append(unary, metrics.UnaryServerInterceptor())
		stream = append(stream, metrics.StreamServerInterceptor())
	}
	unary = append(unary,
		recovery.UnaryServerInterceptor(recoverOpt),
		s.unaryAuthorize,
		s.unaryShutdown,
	)
	stream = append(stream,
		recovery.StreamServerInterceptor(recoverOpt),
		s.streamAuthorize,
		s.streamShutdown,
	)
	if g, ok := opts.Service.(readinessGate); ok {
		unary = append(unary, g.UnaryReady())
		stream = append(stream, g.StreamReady())
	}
	unary = append(unary, UnaryErrorInterceptor())
	stream = append(stream, StreamErrorInterceptor())

	maxRecv := opts.MaxRecvMsgSize
	if maxRecv <= 0 {
		maxRecv = DefaultMaxRecvMsgSize
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	s.creds = newTransportCredentials(opts.TLS, opts.InsecureLoopback, log)
	common := []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp),
			otelgrpc.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
			otelgrpc.WithFilter(func(ri *stats.RPCTagInfo) bool { return ownsMethod(ri.FullMethodName) }))),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(maxRecv),
	}
	grpcOpts := append(common, grpc.Creds(s.creds),
		grpc.MaxConcurrentStreams(DefaultMaxConcurrentStreams),
		// Find callers that vanished without closing their watch streams.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	if pe, ok := opts.Service.(podEncodings); ok {
		// gRPC's own callers only: the HTTP/1.x server's requests come
		// from vanguard, which may ask for another codec.
		grpcOpts = append(grpcOpts, grpc.ForceServerCodecV2(newPodCodec(pe)))
	}
	s.grpc = grpc.NewServer(grpcOpts...)
	// The server of the calls that arrive over HTTP/1.x (http.go): the
	// same options and interceptors, no transport of its own.
	s.httpGRPC = grpc.NewServer(common...)
	if opts.Health != nil {
		s.health = opts.Health.server()
	} else {
		s.health = health.NewServer() // SERVING for "" until Shutdown
		s.health.SetServingStatus(podsyncv1.PodSyncService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	for _, gs := range []*grpc.Server{s.grpc, s.httpGRPC} {
		podsyncv1.RegisterPodSyncServiceServer(gs, opts.Service)
		healthpb.RegisterHealthServer(gs, s.health)
	}
	reflection.Register(s.grpc)
	if metrics != nil {
		metrics.InitializeMetrics(s.grpc)
	}
	if s.http, err = newHTTPServer(s.httpGRPC, log); err != nil {
		return nil, err
	}
	return s, nil
}

// Serve accepts connections on l until Shutdown; then it returns nil.
// Each connection is authenticated, then served as gRPC if it speaks
// HTTP/2 and as JSON or gRPC-Web over HTTP if it speaks HTTP/1.x
// (http.go).
func (s *Server) Serve(l net.Listener) error {
	split := newListenerSplit(l, s.creds)
	httpDone := make(chan error, 1)
	go func() { httpDone <- s.http.Serve(split.http) }()
	grpcDone := make(chan error, 1)
	go func() { grpcDone <- s.grpc.Serve(split.grpc) }()
	err := split.run()
	split.close()
	gerr, herr := <-grpcDone, <-httpDone
	switch {
	case err != nil:
		return fmt.Errorf("serve %s: %w", l.Addr(), err)
	case gerr != nil && !errors.Is(gerr, net.ErrClosed) && !errors.Is(gerr, grpc.ErrServerStopped):
		// net.ErrClosed: Shutdown's HTTP half closed the listener first;
		// grpc.ErrServerStopped: Shutdown came before grpc's Serve began.
		return fmt.Errorf("serve %s: %w", l.Addr(), gerr)
	case herr != nil && !errors.Is(herr, http.ErrServerClosed) && !errors.Is(herr, net.ErrClosed):
		return fmt.Errorf("serve %s: %w", l.Addr(), herr)
	}
	return nil
}

// Shutdown stops the server within ctx's deadline. It sets every health
// status to NOT_SERVING, ends observer streams (the read-only streams:
// WatchPods, GetContainerLogs, health Watch, reflection) with UNAVAILABLE
// and reason SHUTTING_DOWN, stops accepting calls and lets the others —
// the unary calls and the mutating streams (RunPods, SyncPod) — finish.
// Shortly before the deadline (a quarter of the time left, at most a
// second) it cancels the contexts of the calls still running, which end
// with SHUTTING_DOWN too, and at the deadline it closes every connection.
// It returns nil if every call finished, ErrCallsCanceled if calls had to
// be canceled, and ctx's error if some did not even end then. The pods
// keep running: podsyncd is not their parent.
func (s *Server) Shutdown(ctx context.Context) error {
	s.health.Shutdown()
	s.cancelObserve()
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		wg.Go(s.grpc.GracefulStop)
		// Shutdown returns once every HTTP call has ended; Close, below,
		// ends it sooner. The HTTP calls' own grpc.Server then has none.
		wg.Go(func() { _ = s.http.Shutdown(context.WithoutCancel(ctx)) })
		wg.Wait()
		s.httpGRPC.Stop()
		close(done)
	}()

	var abort <-chan time.Time
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		t := time.NewTimer(left - min(left/4, time.Second))
		defer t.Stop()
		abort = t.C
	}
	select {
	case <-done:
		s.cancelAll()
		return nil
	case <-abort:
	case <-ctx.Done():
	}
	s.log.Warn("shutdown deadline near: canceling calls in flight")
	s.cancelAll()
	select {
	case <-done:
		return ErrCallsCanceled
	case <-ctx.Done():
	}
	s.grpc.Stop()
	_ = s.http.Close()
	<-done
	return fmt.Errorf("graceful stop: %w", ctx.Err())
}

// recovered turns a panic into INTERNAL and logs it with its stack.
func (s *Server) recovered(ctx context.Context, p any) error {
	log := ContextLogger(ctx)
	if _, ok := ctx.Value(loggerKey{}).(*zap.Logger); !ok {
		log = s.log
	}
	log.Error("panic in call", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
	return NewError(codes.Internal, errorinfo.ReasonInternal, unknownMessage, nil)
}

func (s *Server) unaryScope(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	rs := newRequestScope(ctx, info.FullMethod, s.authz)
	_ = grpc.SetHeader(ctx, metadata.Pairs(RequestIDHeader, rs.requestID))
	return handler(rs.context(ctx, s.log), req)
}

func (s *Server) streamScope(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	rs := newRequestScope(ctx, info.FullMethod, s.authz)
	_ = ss.SetHeader(metadata.Pairs(RequestIDHeader, rs.requestID))
	return handler(srv, &contextStream{ServerStream: ss, ctx: rs.context(ctx, s.log)})
}

// check authorizes a call and takes its rate-limit tokens: one of the
// mutating bucket for a mutating call, readCost of the read bucket for a
// read call of PodSyncService.
func (s *Server) check(ctx context.Context, fullMethod string) error {
	id, _ := IdentityFromContext(ctx)
	if err := authorize(fullMethod, id, s.authz.role(id)); err != nil {
		return err
	}
	if mutating(fullMethod) {
		return s.limits.allow(id.String())
	}
	return s.reads.allowN(id.String(), s.readLim.readCost(fullMethod))
}

func (s *Server) unaryAuthorize(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := s.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	if counted(info.FullMethod, false) {
		id, _ := IdentityFromContext(ctx)
		release, err := s.streams.acquire(id.String())
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return handler(ctx, req)
}

func (s *Server) streamAuthorize(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	if counted(info.FullMethod, true) {
		id, _ := IdentityFromContext(ss.Context())
		release, err := s.streams.acquire(id.String())
		if err != nil {
			return err
		}
		defer release()
	}
	return handler(srv, ss)
}

// ErrCallsCanceled is Shutdown's error when calls still running near the
// deadline were canceled (and ended with SHUTTING_DOWN).
var ErrCallsCanceled = errors.New("shutdown: calls in flight near the deadline were canceled")

// errShuttingDown is the cause of the contexts Shutdown cancels.
var errShuttingDown = errors.New("podsyncd is shutting down")

// shutdownScope returns ctx canceled (cause errShuttingDown) when
// Shutdown ends calls of this kind, and a function to release it.
func (s *Server) shutdownScope(ctx context.Context, observer bool) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	trigger := s.allCtx
	if observer {
		trigger = s.observersCtx
	}
	stop := context.AfterFunc(trigger, func() { cancel(errShuttingDown) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// shutdownError is the status of a call Shutdown ended; Error() keeps the
// handler's own error for the log.
type shutdownError struct{ cause error }

func (e *shutdownError) Error() string {
	if e.cause == nil {
		return errShuttingDown.Error()
	}
	return errShuttingDown.Error() + ": " + e.cause.Error()
}

func (e *shutdownError) Unwrap() error { return e.cause }

func (e *shutdownError) GRPCStatus() *status.Status {
	return ToStatus(NewError(codes.Unavailable, errorinfo.ReasonShuttingDown,
		"podsyncd is shutting down; retry once it is back", nil))
}

func (s *Server) unaryShutdown(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, release := s.shutdownScope(ctx, false)
	defer release()
	resp, err := handler(ctx, req)
	if err != nil && errors.Is(context.Cause(ctx), errShuttingDown) {
		return nil, &shutdownError{cause: err}
	}
	return resp, err
}

func (s *Server) streamShutdown(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	// Read-only streams may last forever; they end as soon as Shutdown
	// starts. Mutating streams get until the deadline to finish.
	observer := !finishAtShutdown(info.FullMethod)
	ctx, release := s.shutdownScope(ss.Context(), observer)
	defer release()
	err := handler(srv, &contextStream{ServerStream: ss, ctx: ctx})
	if (err != nil || observer) && errors.Is(context.Cause(ctx), errShuttingDown) {
		return &shutdownError{cause: err}
	}
	return err
}

// contextStream is a grpc.ServerStream with another context.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (c *contextStream) Context() context.Context { return c.ctx }
