package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// DefaultAddress is podsyncd's unix socket, the target New dials when it is
// given none.
const DefaultAddress = "unix:///run/podsync/podsync.sock"

// DefaultUserAgent is the user agent New sends unless WithUserAgent says
// otherwise; gRPC appends its own.
const DefaultUserAgent = "podsync-client-go"

// maxUnixPath is the longest socket path the kernel accepts (sun_path
// holds 108 bytes with the terminating NUL).
const maxUnixPath = 107

// Defaults of the retry and resume back-off.
const (
	defaultBackoff = 100 * time.Millisecond
	maxBackoff     = 5 * time.Second
)

// Client calls podsyncd's PodSyncService. It is safe for concurrent use;
// create one per process and Close it when done.
type Client struct {
	api    podsyncv1.PodSyncServiceClient
	health healthpb.HealthClient
	opts   options
	// conn is the connection New made, closed by Close; nil for
	// NewFromConn.
	conn *grpc.ClientConn

	closeOnce sync.Once
	closeErr  error

	// epoch is the lease epoch every call carries (UseLeaseEpoch), 0 for
	// none.
	epoch atomic.Int64
}

// Option configures New and NewFromConn.
type Option func(*options)

type options struct {
	tlsConfig    *tls.Config
	tlsFiles     *tlsFiles
	insecure     bool
	block        bool
	dialOpts     []grpc.DialOption
	retryMax     int
	retryBackoff time.Duration
	userAgent    string
}

type tlsFiles struct{ cert, key, ca string }

// WithTLSFiles connects over TCP with mutual TLS: the client certificate
// and key in PEM files certFile and keyFile, and the CA bundle caFile that
// signed podsyncd's certificate. New reads the files. certFile and keyFile
// may both be empty (no client certificate, which podsyncd refuses unless
// configured otherwise); an empty caFile means the system's roots.
func WithTLSFiles(certFile, keyFile, caFile string) Option {
	return func(o *options) { o.tlsFiles = &tlsFiles{cert: certFile, key: keyFile, ca: caFile} }
}

// WithTLSConfig connects over TCP with TLS configured by cfg (a client
// certificate in Certificates, RootCAs). New uses a clone of cfg; an empty
// ServerName is taken from the target's host.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(o *options) { o.tlsConfig = cfg }
}

// WithInsecure connects over plaintext TCP, for podsyncd's
// --insecure-listen-loopback development listener. New refuses it for a
// host other than a loopback address or "localhost", and together with
// TLS options. Unix sockets never use TLS, so it changes nothing for them.
func WithInsecure() Option {
	return func(o *options) { o.insecure = true }
}

// WithBlock makes New wait until the connection is ready, or fail with
// ErrUnavailable when ctx ends first. Without it New does not connect:
// connection errors surface on the first call.
func WithBlock() Option {
	return func(o *options) { o.block = true }
}

// WithDialOptions adds gRPC dial options, applied after the SDK's own (so
// they win). NewFromConn ignores them.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

// WithRetry retries a call that fails with UNAVAILABLE up to max times,
// waiting backoff before the first retry and doubling the wait each time
// (up to 5 s, with jitter), as long as ctx allows. Only calls that are
// safe to repeat are retried: PlanPod, GetPod, ListPods and DeletePod;
// SyncPod, WatchPods and Logs until their stream has delivered its first
// message. RunPods is never retried (it runs and waits for pods), nor is
// Health. The default is no retries. backoff <= 0 means 100 ms.
//
// Watch resumes with the same back-off whatever max is.
func WithRetry(maxRetries int, backoff time.Duration) Option {
	return func(o *options) {
		o.retryMax = max(maxRetries, 0)
		o.retryBackoff = backoff
	}
}

// WithUserAgent sets the user agent New sends (gRPC appends its own); the
// default is DefaultUserAgent. NewFromConn ignores it.
func WithUserAgent(s string) Option {
	return func(o *options) { o.userAgent = s }
}

// New returns a Client of the podsyncd at target:
//
//   - "" for DefaultAddress;
//   - "unix:///run/podsync/podsync.sock", "unix:/run/podsync/podsync.sock"
//     or "/run/podsync/podsync.sock": a unix socket, which must be an
//     absolute path; podsyncd authenticates the caller by its uid;
//   - "tcp://host:port" or "host:port": TCP, which needs WithTLSFiles or
//     WithTLSConfig (mutual TLS), or WithInsecure for a loopback host.
//
// New validates target and options and builds the connection without
// dialing (unless WithBlock), so it does not block: a podsyncd that is not
// there shows as ErrUnavailable on the first call. ctx bounds WithBlock's
// wait only. Close the Client when done.
func New(ctx context.Context, target string, opts ...Option) (*Client, error) {
	o := newOptions(opts)
	ep, err := parseTarget(target)
	if err != nil {
		return nil, err
	}
	creds, err := o.credentials(ep)
	if err != nil {
		return nil, fmt.Errorf("podsync: %s: %w", ep, err)
	}
	userAgent := o.userAgent
	if userAgent == "" {
		userAgent = DefaultUserAgent
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent(userAgent),
		// The caller's trace context goes to podsyncd (W3C traceparent),
		// whose spans then join the caller's trace; client spans are
		// recorded when the global TracerProvider records.
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})))),
		// Find a vanished podsyncd under a long watch; podsyncd permits
		// pings every 10 s.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	}
	dialOpts = append(dialOpts, o.dialOpts...)
	conn, err := grpc.NewClient(ep.grpcTarget(), dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("podsync: %s: %w", ep, err)
	}
	if o.block {
		if err := waitReady(ctx, conn, ep.String()); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	c := newClient(conn, o)
	c.conn = conn
	return c, nil
}

// NewFromConn returns a Client that calls podsyncd over conn, such as an
// in-process server's bufconn connection. Close does not close conn.
// Options about the connection (TLS, WithInsecure, WithBlock,
// WithDialOptions, WithUserAgent) are ignored.
func NewFromConn(conn grpc.ClientConnInterface, opts ...Option) *Client {
	return newClient(conn, newOptions(opts))
}

func newClient(conn grpc.ClientConnInterface, o options) *Client {
	return &Client{api: podsyncv1.NewPodSyncServiceClient(conn), health: healthpb.NewHealthClient(conn), opts: o}
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.retryBackoff <= 0 {
		o.retryBackoff = defaultBackoff
	}
	return o
}

// Close closes the connection New made; for a Client of NewFromConn it
// does nothing. Calls in flight fail with CANCELLED. Close may be called
// more than once.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		if c.conn != nil {
			c.closeErr = c.conn.Close()
		}
	})
	return c.closeErr
}

// API returns the generated PodSyncService client on the Client's
// connection, for what the typed methods do not cover. Its errors are
// plain gRPC status errors (Reason and FieldViolations read them too) and
// it never retries.
func (c *Client) API() podsyncv1.PodSyncServiceClient { return c.api }

// waitReady connects conn and waits until it is READY or ctx ends; then
// it fails with UNAVAILABLE, whose cause is ctx's error.
func waitReady(ctx context.Context, conn *grpc.ClientConn, target string) error {
	conn.Connect()
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.Shutdown:
			return newError("connect", target, codes.Canceled, "connection closed")
		}
		if !conn.WaitForStateChange(ctx, s) {
			e := newError("connect", target, codes.Unavailable, "podsyncd is not ready: "+ctx.Err().Error())
			e.cause = ctx.Err()
			return e
		}
	}
}

// endpoint is a parsed target.
type endpoint struct {
	unix bool
	path string // socket path, when unix
	host string // TCP host, without brackets
	port string
}

func (e endpoint) String() string {
	if e.unix {
		return "unix://" + e.path
	}
	return "tcp://" + net.JoinHostPort(e.host, e.port)
}

// grpcTarget is the target for grpc.NewClient.
func (e endpoint) grpcTarget() string {
	if e.unix {
		return "unix://" + e.path
	}
	return "dns:///" + net.JoinHostPort(e.host, e.port)
}

// loopback reports whether a TCP endpoint's host is a loopback address or
// "localhost".
func (e endpoint) loopback() bool {
	if strings.EqualFold(e.host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(e.host)
	return err == nil && ip.Unmap().IsLoopback()
}

// errTarget explains the target forms.
var errTarget = errors.New(`want "unix:///path/to/socket", "/path/to/socket", "tcp://host:port" or "host:port"`)

func parseTarget(target string) (endpoint, error) {
	if target == "" {
		target = DefaultAddress
	}
	bad := func(why string) (endpoint, error) {
		return endpoint{}, fmt.Errorf("podsync: target %q: %s: %w", target, why, errTarget)
	}
	switch {
	case strings.HasPrefix(target, "unix://"):
		rest := strings.TrimPrefix(target, "unix://")
		if !strings.HasPrefix(rest, "/") {
			return bad("a unix target needs an absolute path (three slashes)")
		}
		return unixEndpoint(target, rest)
	case strings.HasPrefix(target, "unix:"):
		return unixEndpoint(target, strings.TrimPrefix(target, "unix:"))
	case strings.HasPrefix(target, "/"):
		return unixEndpoint(target, target)
	case strings.HasPrefix(target, "tcp://"):
		return tcpEndpoint(target, strings.TrimPrefix(target, "tcp://"))
	case strings.Contains(target, "://"):
		scheme, _, _ := strings.Cut(target, "://")
		return bad(fmt.Sprintf("unsupported scheme %q", scheme))
	}
	return tcpEndpoint(target, target)
}

func unixEndpoint(target, path string) (endpoint, error) {
	bad := func(why string) (endpoint, error) {
		return endpoint{}, fmt.Errorf("podsync: target %q: %s: %w", target, why, errTarget)
	}
	switch {
	case path == "":
		return bad("no socket path")
	case !filepath.IsAbs(path):
		return bad(fmt.Sprintf("socket path %q is not absolute", path))
	case strings.ContainsRune(path, 0):
		return bad("socket path contains a NUL byte")
	case len(path) > maxUnixPath:
		return bad(fmt.Sprintf("socket path is %d bytes long, more than the %d a unix socket allows", len(path), maxUnixPath))
	case strings.HasSuffix(path, "/"):
		return bad(fmt.Sprintf("socket path %q names a directory", path))
	}
	return endpoint{unix: true, path: filepath.Clean(path)}, nil
}

func tcpEndpoint(target, hostport string) (endpoint, error) {
	bad := func(why string) (endpoint, error) {
		return endpoint{}, fmt.Errorf("podsync: target %q: %s: %w", target, why, errTarget)
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return bad(err.Error())
	}
	if host == "" {
		return bad("no host")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return bad(fmt.Sprintf("port %q is not a number from 1 to 65535", port))
	}
	if strings.ContainsAny(host, "/?#@") {
		return bad(fmt.Sprintf("host %q is not a host name or address", host))
	}
	return endpoint{host: host, port: port}, nil
}

// credentials chooses the transport credentials of an endpoint.
func (o *options) credentials(ep endpoint) (credentials.TransportCredentials, error) {
	hasTLS := o.tlsConfig != nil || o.tlsFiles != nil
	if ep.unix {
		if hasTLS {
			return nil, errors.New("TLS options do not apply to a unix socket: podsyncd authenticates socket callers by uid")
		}
		return insecure.NewCredentials(), nil
	}
	switch {
	case o.tlsConfig != nil && o.tlsFiles != nil:
		return nil, errors.New("WithTLSFiles and WithTLSConfig are exclusive")
	case hasTLS && o.insecure:
		return nil, errors.New("WithInsecure and TLS options are exclusive")
	case o.insecure && !ep.loopback():
		return nil, fmt.Errorf("WithInsecure needs a loopback host, not %q: podsyncd accepts plaintext TCP on loopback only", ep.host)
	case o.insecure:
		return insecure.NewCredentials(), nil
	case !hasTLS:
		return nil, errors.New("TCP needs TLS: use WithTLSFiles or WithTLSConfig, or WithInsecure for a loopback development listener")
	}
	cfg := o.tlsConfig
	if o.tlsFiles != nil {
		var err error
		if cfg, err = o.tlsFiles.load(); err != nil {
			return nil, err
		}
	} else {
		cfg = cfg.Clone()
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return credentials.NewTLS(cfg), nil
}

// load reads the files of WithTLSFiles.
func (f *tlsFiles) load() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case f.cert != "" && f.key != "":
		cert, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case f.cert != "" || f.key != "":
		return nil, errors.New("WithTLSFiles needs both a certificate and a key file, or neither")
	}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("CA bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA bundle %s: no PEM certificate", f.ca)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
