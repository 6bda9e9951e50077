package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/podsync/podsync/errorinfo"
)

// One listener, two protocols. Every accepted connection is authenticated
// first, as before (unix socket peer credentials, mTLS, or the plaintext
// loopback exception), and then handed, with what authenticated it, to one
// of two servers by the HTTP version it speaks:
//
//   - HTTP/2 — ALPN "h2" over TLS, the HTTP/2 client preface in plaintext —
//     is gRPC, served by grpc-go's own transport as it always was;
//   - HTTP/1.x — ALPN "http/1.1" (which the server prefers, so curl and
//     browsers, which offer both, get it) or no ALPN over TLS, anything but
//     the preface in plaintext — is served by net/http and
//     connectrpc.com/vanguard: the Connect protocol (JSON or binary, unary
//     and server streams), gRPC-Web, and the REST routes of the
//     google.api.http rules in the protos. vanguardgrpc turns each into a
//     gRPC call of a second grpc.Server built with the same interceptors
//     (authorization, rate limits, stream budgets, shutdown, readiness,
//     errors) and the same service, so a call over HTTP is the same call.
//
// The second grpc.Server is its own so that Shutdown can let HTTP calls
// finish as it lets gRPC calls finish: grpc-go's GracefulStop closes at
// once the calls its ServeHTTP serves.

const (
	// handshakeTimeout bounds the authentication of a connection and the
	// read of its first bytes.
	handshakeTimeout = 20 * time.Second
	// maxHTTPMessageBytes bounds one JSON request or response message
	// vanguard buffers while transcoding; the gRPC server's MaxRecvMsgSize
	// then bounds the request as protobuf.
	maxHTTPMessageBytes = 32 << 20
	// httpIdleTimeout closes HTTP/1.1 keep-alive connections left idle.
	httpIdleTimeout = 2 * time.Minute
)

// alpnProtocols are the protocols a TLS listener offers, in the server's
// order of preference: a client that offers both (curl, browsers,
// connect-node over HTTP/1.1) is served JSON over HTTP/1.1; a gRPC client
// offers h2 alone.
var alpnProtocols = []string{"http/1.1", "h2"}

// http2Preface is how an HTTP/2 connection without TLS begins (RFC 9113
// 3.4): prior knowledge, as gRPC clients speak over a unix socket.
var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// withALPN returns cfg offering alpnProtocols, also in the configurations
// its GetConfigForClient returns (a reloaded certificate keeps them).
func withALPN(cfg *tls.Config) *tls.Config {
	cfg = cfg.Clone()
	cfg.NextProtos = alpnProtocols
	if get := cfg.GetConfigForClient; get != nil {
		cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hello)
			if err != nil || c == nil {
				return c, err
			}
			c = c.Clone()
			c.NextProtos = alpnProtocols
			return c, nil
		}
	}
	return cfg
}

// authedConn is a connection that transportCredentials already
// authenticated: its handshake is done, info is what it proved.
type authedConn struct {
	net.Conn
	info credentials.AuthInfo
	// r holds the bytes read to find the protocol; nil if none were.
	r *bufio.Reader
}

func (c *authedConn) Read(p []byte) (int, error) {
	if c.r != nil {
		return c.r.Read(p)
	}
	return c.Conn.Read(p)
}

// isHTTP2 reports whether c speaks HTTP/2 (gRPC) rather than HTTP/1.x:
// ALPN tells over TLS, the first bytes without it.
func (c *authedConn) isHTTP2() (bool, error) {
	if ti, ok := c.info.(credentials.TLSInfo); ok {
		return ti.State.NegotiatedProtocol == "h2", nil
	}
	c.r = bufio.NewReaderSize(c.Conn, 64)
	// No method of HTTP/1.x begins with "PRI": three bytes tell.
	head, err := c.r.Peek(3)
	if err != nil {
		return false, fmt.Errorf("read the protocol of the connection: %w", err)
	}
	return bytes.Equal(head, http2Preface[:3]), nil
}

// authedKey is the context key of an HTTP connection's AuthInfo
// (http.Server.ConnContext), which identityFromPeer reads: grpc-go's
// ServeHTTP records no AuthInfo of its own for a connection it did not
// authenticate.
type authedKey struct{}

// connQueue is a net.Listener fed with connections by a listenerSplit.
type connQueue struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	// closeAll closes the split, and so the listener it accepts on.
	closeAll func()
}

func newConnQueue(addr net.Addr, closeAll func()) *connQueue {
	return &connQueue{addr: addr, conns: make(chan net.Conn), done: make(chan struct{}), closeAll: closeAll}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	q.closeAll()
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

// put hands c to the queue's server, or closes it if the queue is closed.
func (q *connQueue) put(c net.Conn) {
	select {
	case q.conns <- c:
	case <-q.done:
		_ = c.Close()
	}
}

// listenerSplit accepts on one listener, authenticates each connection
// and queues it for the gRPC or the HTTP server.
type listenerSplit struct {
	l          net.Listener
	creds      *transportCredentials
	grpc, http *connQueue
	closeOnce  sync.Once
	wg         sync.WaitGroup
}

func newListenerSplit(l net.Listener, creds *transportCredentials) *listenerSplit {
	s := &listenerSplit{l: l, creds: creds}
	s.grpc = newConnQueue(l.Addr(), s.close)
	s.http = newConnQueue(l.Addr(), s.close)
	return s
}

// close closes the listener and both queues; connections being
// authenticated are closed when their handshake ends.
func (s *listenerSplit) close() {
	s.closeOnce.Do(func() {
		_ = s.l.Close()
		s.grpc.once.Do(func() { close(s.grpc.done) })
		s.http.once.Do(func() { close(s.http.done) })
	})
}

// run accepts until the listener is closed, then waits for the
// handshakes in progress.
func (s *listenerSplit) run() error {
	defer s.wg.Wait()
	var delay time.Duration
	for {
		raw, err := s.l.Accept()
		var temp interface{ Temporary() bool }
		if err != nil && errors.As(err, &temp) && temp.Temporary() {
			// Out of file descriptors, say: wait, as net/http and grpc-go do.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if err != nil {
			s.close()
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept on %s: %w", s.l.Addr(), err)
		}
		s.wg.Go(func() { s.route(raw) })
	}
}

// route authenticates raw and queues it by protocol.
func (s *listenerSplit) route(raw net.Conn) {
	_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
	conn, info, err := s.creds.authenticate(raw)
	if err != nil {
		_ = raw.Close()
		return
	}
	c := &authedConn{Conn: conn, info: info}
	h2, err := c.isHTTP2()
	if err != nil {
		_ = c.Close()
		return
	}
	_ = raw.SetDeadline(time.Time{})
	if h2 {
		s.grpc.put(c)
		return
	}
	s.http.put(c)
}

// newHTTPServer returns the HTTP/1.x server of the Connect, gRPC-Web and
// REST protocols over gs.
func newHTTPServer(gs *grpc.Server, log *zap.Logger) (*http.Server, error) {
	transcoder, err := vanguardgrpc.NewTranscoder(gs, vanguard.WithDefaultServiceOptions(
		vanguard.WithMaxMessageBufferBytes(maxHTTPMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("http transcoder: %w", err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	return &http.Server{
		Handler:           loopbackHostOnly(transcoder),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if ac, ok := c.(*authedConn); ok {
				return context.WithValue(ctx, authedKey{}, ac.info)
			}
			return ctx
		},
	}, nil
}

// loopbackHostOnly refuses an HTTP request on a plaintext loopback
// connection (--insecure-listen-loopback) whose Host is not a loopback
// address or "localhost": a web page whose name an attacker rebinds to
// 127.0.0.1 would otherwise reach podsyncd from the browser with the
// page's origin (DNS rebinding). Unix sockets are out of a browser's
// reach, and an mTLS listener needs the client's certificate and the
// server's name.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, plain := r.Context().Value(authedKey{}).(plaintextInfo); plain && !loopbackHost(r.Host) {
			writeStatusJSON(w, http.StatusForbidden, NewError(codes.PermissionDenied, errorinfo.ReasonPermissionDenied,
				fmt.Sprintf("host %q is not a loopback address: a plaintext loopback listener answers only requests for 127.0.0.1, ::1 or localhost", r.Host), nil))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether an HTTP Host names this machine's loopback.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// writeStatusJSON writes err's status as google.rpc.Status JSON, as the
// REST routes answer errors.
func writeStatusJSON(w http.ResponseWriter, code int, err error) {
	b, merr := protojson.Marshal(ToStatus(err).Proto())
	if merr != nil {
		b = []byte(`{"code":13,"message":"marshal the error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
