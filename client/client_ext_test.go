package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/internal/testing/testcert"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/server"
)

// TestNewRefuses: targets and options New rejects, without dialing.
func TestNewRefuses(t *testing.T) {
	tlsCfg := client.WithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS13})
	for _, tc := range []struct {
		name, target string
		opts         []client.Option
		want         string
	}{
		{"tcp without TLS", "tcp://127.0.0.1:7443", nil, "TCP needs TLS"},
		{"host:port without TLS", "node-1.example:7443", nil, "TCP needs TLS"},
		{"insecure non-loopback", "10.0.0.1:7443", []client.Option{client.WithInsecure()}, "loopback"},
		{"insecure host name", "tcp://node-1.example:7443", []client.Option{client.WithInsecure()}, "loopback"},
		{"insecure and TLS", "127.0.0.1:7443", []client.Option{client.WithInsecure(), tlsCfg}, "exclusive"},
		{"both TLS options", "127.0.0.1:7443", []client.Option{client.WithTLSFiles("", "", ""), tlsCfg}, "exclusive"},
		{"TLS on a unix socket", "unix:///run/podsync/podsync.sock", []client.Option{tlsCfg}, "unix socket"},
		{"relative unix path", "unix://run/podsync.sock", nil, "absolute"},
		{"relative unix: path", "unix:podsync.sock", nil, "not absolute"},
		{"empty unix path", "unix:", nil, "no socket path"},
		{"unix directory", "unix:///run/podsync/", nil, "directory"},
		{"long unix path", "/" + strings.Repeat("x", 120), nil, "107"},
		{"other scheme", "http://127.0.0.1:7443", nil, `scheme "http"`},
		{"no port", "node-1.example", nil, "missing port"},
		{"port 0", "127.0.0.1:0", []client.Option{client.WithInsecure()}, "port"},
		{"no host", "tcp://:7443", []client.Option{client.WithInsecure()}, "no host"},
		{"certificate without key", "127.0.0.1:7443", []client.Option{client.WithTLSFiles("cert.pem", "", "")}, "both"},
		{"missing CA file", "127.0.0.1:7443", []client.Option{client.WithTLSFiles("", "", "/nonexistent/ca.pem")}, "CA bundle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(t.Context(), tc.target, tc.opts...)
			if err == nil {
				_ = c.Close()
				t.Fatalf("New(%q) succeeded", tc.target)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "podsync: ") {
				t.Errorf("New(%q): %v, want it to say %q", tc.target, err, tc.want)
			}
		})
	}
}

// TestNewAccepts: targets and options New takes without dialing; Close
// twice is fine.
func TestNewAccepts(t *testing.T) {
	for _, tc := range []struct {
		target string
		opts   []client.Option
	}{
		{"", nil},
		{"/run/podsync/podsync.sock", nil},
		{"unix:/run/podsync/podsync.sock", []client.Option{client.WithInsecure()}},
		{"127.0.0.1:7443", []client.Option{client.WithInsecure()}},
		{"tcp://localhost:7443", []client.Option{client.WithInsecure()}},
		{"[::1]:7443", []client.Option{client.WithInsecure()}},
		{"tcp://node-1.example:7443", []client.Option{client.WithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS13})}},
		{"node-1.example:7443", []client.Option{client.WithTLSFiles("", "", ""), client.WithUserAgent("test"), client.WithRetry(2, 0)}},
	} {
		c, err := client.New(t.Context(), tc.target, tc.opts...)
		if err != nil {
			t.Errorf("New(%q): %v", tc.target, err)
			continue
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close again: %v", err)
		}
	}
}

// TestNewUnixForms: the three spellings of a socket reach podsyncd.
func TestNewUnixForms(t *testing.T) {
	d := newDaemon(t)
	path := strings.TrimPrefix(d.Target, "unix://")
	for _, target := range []string{"unix://" + path, "unix:" + path, path} {
		c, err := client.New(t.Context(), target, client.WithUserAgent("podsync-test"))
		if err != nil {
			t.Fatalf("New(%q): %v", target, err)
		}
		if st, err := c.Health(testContext(t)); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("%s: Health %v %v", target, st, err)
		}
		_ = c.Close()
	}
}

// TestNewNoDaemon: without WithBlock, New succeeds and calls fail with
// ErrUnavailable; with it, New fails when ctx ends.
func TestNewNoDaemon(t *testing.T) {
	target := "unix://" + filepath.Join(t.TempDir(), "none.sock")
	c, err := client.New(t.Context(), target)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_, err = c.GetPod(testContext(t), "", "web")
	wantError(t, err, codes.Unavailable, "", "ErrUnavailable")
	if _, err := c.Health(testContext(t)); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("Health: %v", err)
	}

	// Retries end with ctx, whose error says what the last attempt met
	// (a second: on a busy machine a first attempt can outlast 100 ms).
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	retrying, err := client.New(t.Context(), target, client.WithRetry(100, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = retrying.Close() }()
	_, err = retrying.GetPod(ctx, "", "web")
	wantError(t, err, codes.DeadlineExceeded, "", "ErrDeadlineExceeded")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Unavailable") {
		t.Errorf("GetPod with retries until the deadline: %v", err)
	}

	ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = client.New(ctx, target, client.WithBlock())
	if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("New with WithBlock: %v, want ErrUnavailable and context.DeadlineExceeded", err)
	}
}

// TestNewWithBlock: WithBlock returns once connected.
func TestNewWithBlock(t *testing.T) {
	d := newDaemon(t)
	c, err := client.New(testContext(t), d.Target, client.WithBlock())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.ListPods(testContext(t), &podsyncv1.ListPodsRequest{}); err != nil {
		t.Fatal(err)
	}
}

// TestNewInsecureLoopback: plaintext TCP to podsyncd's loopback listener,
// where the caller is anonymous.
func TestNewInsecureLoopback(t *testing.T) {
	d := newDaemon(t, func(o *testdaemon.Options) {
		o.Transport = testdaemon.TCP
		o.Server.Roles = server.Roles{Read: []string{server.Anonymous}}
	})
	c := d.client(t, client.WithInsecure())
	if _, err := c.ListPods(testContext(t), &podsyncv1.ListPodsRequest{}); err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	_, err := c.SyncPod(testContext(t), syncReq(t, "", "web", nil), nil)
	wantError(t, err, codes.PermissionDenied, client.ReasonPermissionDenied, "ErrPermissionDenied")

	// A plaintext caller podsyncd gives no role is unauthenticated.
	d = newDaemon(t, func(o *testdaemon.Options) { o.Transport = testdaemon.TCP })
	_, err = d.client(t, client.WithInsecure()).ListPods(testContext(t), &podsyncv1.ListPodsRequest{})
	wantError(t, err, codes.Unauthenticated, client.ReasonUnauthenticated, "ErrUnauthenticated")
}

// TestNewTLSFiles: mutual TLS with certificate files; podsyncd knows the
// caller by its certificate's common name.
func TestNewTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "test CA")
	serverCert := ca.Issue(t, testcert.Leaf{CN: "podsyncd", IPs: testcert.Localhost, Server: true})
	d := newDaemon(t, func(o *testdaemon.Options) {
		o.Transport = testdaemon.TCP
		o.Server.Roles = server.Roles{Admin: []string{"cn:deployer"}}
		o.Server.TLS = &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{serverCert},
			ClientCAs:    ca.Pool(),
			ClientAuth:   tls.RequireAndVerifyClientCert,
		}
	})
	caFile := testcert.WritePEM(t, dir, "ca.pem", "CERTIFICATE", ca.Cert.Raw)
	certFile, keyFile := testcert.WriteFiles(t, dir, "deployer", ca.Issue(t, testcert.Leaf{CN: "deployer"}))

	c := d.client(t, client.WithTLSFiles(certFile, keyFile, caFile))
	syncPod(t, c, "", "web", nil)

	// Without a client certificate the handshake fails.
	_, err := d.client(t, client.WithTLSFiles("", "", caFile)).ListPods(testContext(t), &podsyncv1.ListPodsRequest{})
	if !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("without a client certificate: %v", err)
	}
}
