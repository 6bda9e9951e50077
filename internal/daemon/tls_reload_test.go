package daemon_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/internal/daemon"
	"github.com/podsync/podsync/internal/testing/testcert"
	"github.com/podsync/podsync/server"
)

// reloadPKI is a CA, a server certificate and clients alice and bob, the
// files written to dir and a podsyncd server serving over a TLSReloader
// of them.
type reloadPKI struct {
	t          *testing.T
	ca         *testcert.CA
	alice, bob tls.Certificate
	dir        string
	files      daemon.TLSFiles
	reloader   *daemon.TLSReloader
	logs       *observer.ObservedLogs
	reg        *prometheus.Registry
	addr       string
}

// newReloadPKI writes the files and serves; cn:alice and cn:bob may read.
// crl, if not nil, gives the CRL file's contents.
func newReloadPKI(t *testing.T, crl func(p *reloadPKI) []byte) *reloadPKI {
	t.Helper()
	p := &reloadPKI{t: t, ca: testcert.NewCA(t, "clients and server CA"), dir: t.TempDir(), reg: prometheus.NewRegistry()}
	p.alice, p.bob = p.ca.Issue(t, testcert.Leaf{CN: "alice"}), p.ca.Issue(t, testcert.Leaf{CN: "bob"})
	p.files.Cert, p.files.Key = p.writeServerCert("podsyncd")
	p.files.ClientCA = testcert.WritePEM(t, p.dir, "ca.pem", "CERTIFICATE", p.ca.Cert.Raw)
	if crl != nil {
		p.files.CRL = filepath.Join(p.dir, "crl")
		p.write(p.files.CRL, crl(p))
	}
	core, logs := observer.New(zapcore.InfoLevel)
	p.logs = logs
	sec := daemon.Security{TLSCertFile: p.files.Cert, TLSKeyFile: p.files.Key, TLSClientCAFile: p.files.ClientCA,
		TLSCRLFile: p.files.CRL, Roles: server.Roles{Read: []string{"cn:alice", "cn:bob"}}}
	var opts server.Options
	r, err := sec.Apply(&opts, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(p.reg); err != nil {
		t.Fatal(err)
	}
	p.reloader = r
	opts.Service = podsyncv1.UnimplementedPodSyncServiceServer{}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = l.Addr().String()
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
	return p
}

func (p *reloadPKI) write(name string, data []byte) {
	p.t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		p.t.Fatal(err)
	}
}

// pemCRL encodes a DER CRL in PEM.
func pemCRL(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
}

// writeServerCert issues a server certificate named cn and writes it
// over the server's files.
func (p *reloadPKI) writeServerCert(cn string) (certFile, keyFile string) {
	return testcert.WriteFiles(p.t, p.dir, "server", p.ca.Issue(p.t, testcert.Leaf{CN: cn, IPs: testcert.Localhost, Server: true}))
}

// call connects anew as the client cert and makes one health check; it
// returns the server certificate the connection saw.
func (p *reloadPKI) call(client tls.Certificate) (*x509.Certificate, error) {
	p.t.Helper()
	creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: p.ca.Pool(), Certificates: []tls.Certificate{client}})
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		p.t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(p.t.Context(), 10*time.Second)
	defer cancel()
	var pr peer.Peer
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&pr)); err != nil {
		return nil, err
	}
	return pr.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0], nil
}

func (p *reloadPKI) serverCN(client tls.Certificate) string {
	p.t.Helper()
	c, err := p.call(client)
	if err != nil {
		p.t.Fatalf("call: %v", err)
	}
	return c.Subject.CommonName
}

func (p *reloadPKI) reloads(result string) float64 {
	p.t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		p.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "podsync_tls_reloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	p.t.Fatalf("no podsync_tls_reloads_total{result=%q}", result)
	return 0
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTLSReloadRotatesTheServerCertificate: a server certificate replaced
// on disk is what the next connection sees, without a restart: found by
// the periodic check, or at once on SIGHUP.
func TestTLSReloadRotatesTheServerCertificate(t *testing.T) {
	p := newReloadPKI(t, nil)
	alice := p.alice
	if cn := p.serverCN(alice); cn != "podsyncd" {
		t.Fatalf("server certificate %q, want podsyncd", cn)
	}

	t.Run("polled", func(t *testing.T) {
		stop := p.reloader.Start(t.Context(), 20*time.Millisecond)
		defer stop()
		p.writeServerCert("podsyncd-rotated")
		waitUntil(t, "a new connection to see the rotated certificate", func() bool { return p.serverCN(alice) == "podsyncd-rotated" })
		if got := p.reloads("success"); got != 1 {
			t.Errorf("reloads{success} %g, want 1", got)
		}
	})

	t.Run("SIGHUP", func(t *testing.T) {
		stop := p.reloader.Start(t.Context(), time.Hour)
		defer stop()
		p.writeServerCert("podsyncd-after-hup")
		if cn := p.serverCN(alice); cn != "podsyncd-rotated" {
			t.Fatalf("before SIGHUP, with an hour's interval: server certificate %q", cn)
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "SIGHUP to load the rotated certificate", func() bool { return p.serverCN(alice) == "podsyncd-after-hup" })
	})
}

// TestTLSCRLRevokesAClient: a client certificate revoked by a new CRL is
// refused at its next connection, logged with its serial and identity,
// while another client still connects.
func TestTLSCRLRevokesAClient(t *testing.T) {
	p := newReloadPKI(t, func(p *reloadPKI) []byte { return pemCRL(p.ca.CRL(t, 1)) })
	for _, c := range []tls.Certificate{p.alice, p.bob} {
		if _, err := p.call(c); err != nil {
			t.Fatalf("before the revocation: %v", err)
		}
	}
	p.write(p.files.CRL, pemCRL(p.ca.CRL(t, 2, p.alice)))
	if err := p.reloader.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.call(p.alice); err == nil {
		t.Error("alice, revoked, still connects")
	}
	if _, err := p.call(p.bob); err != nil {
		t.Errorf("bob, not revoked: %v", err)
	}
	wantRevokedLogged(t, p, p.alice, "cn:alice")
}

// TestTLSCRLAtStart: a CRL given at start applies to the first
// connection, in DER as in PEM.
func TestTLSCRLAtStart(t *testing.T) {
	for name, encode := range map[string]func([]byte) []byte{"DER": func(b []byte) []byte { return b }, "PEM": pemCRL} {
		t.Run(name, func(t *testing.T) {
			p := newReloadPKI(t, func(p *reloadPKI) []byte { return encode(p.ca.CRL(t, 1, p.bob)) })
			if _, err := p.call(p.bob); err == nil {
				t.Error("bob, revoked, connects")
			}
			if _, err := p.call(p.alice); err != nil {
				t.Errorf("alice, not revoked: %v", err)
			}
			wantRevokedLogged(t, p, p.bob, "cn:bob")
		})
	}
}

func wantRevokedLogged(t *testing.T, p *reloadPKI, c tls.Certificate, identity string) {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	serial := fmt.Sprintf("%X", leaf.SerialNumber)
	refused := p.logs.FilterMessage("client certificate revoked: connection refused").All()
	if len(refused) == 0 {
		t.Fatal("no log line for the revoked client")
	}
	if f := refused[0].ContextMap(); f["serial"] != serial || f["identity"] != identity {
		t.Errorf("log fields %v, want serial %s and identity %s", f, serial, identity)
	}
}

// TestTLSReloadKeepsTheOldConfigOnABrokenFile: a changed file that does
// not load keeps the previous configuration (new connections still get
// the old certificate, a revoked client stays refused), is logged and
// counted once however often it is polled, and a good file after it loads.
func TestTLSReloadKeepsTheOldConfigOnABrokenFile(t *testing.T) {
	otherCA := testcert.NewCA(t, "another CA")
	for _, tt := range []struct {
		name       string
		breakFiles func(p *reloadPKI)
		want       string
	}{
		{"garbage certificate", func(p *reloadPKI) { p.write(p.files.Cert, []byte("not a certificate")) }, "--tls-cert-file"},
		{"key of another certificate", func(p *reloadPKI) {
			other := t.TempDir()
			_, key := testcert.WriteFiles(t, other, "other", p.ca.Issue(t, testcert.Leaf{CN: "x", Server: true}))
			data, err := os.ReadFile(key)
			if err != nil {
				t.Fatal(err)
			}
			p.write(p.files.Key, data)
		}, "--tls-key-file"},
		{"CA file without certificates", func(p *reloadPKI) { p.write(p.files.ClientCA, []byte("nothing here")) }, "no PEM certificate"},
		{"CA file removed", func(p *reloadPKI) {
			if err := os.Remove(p.files.ClientCA); err != nil {
				t.Fatal(err)
			}
		}, "--tls-client-ca-file"},
		{"garbage CRL", func(p *reloadPKI) { p.write(p.files.CRL, []byte("garbage")) }, "--tls-crl-file"},
		{"CRL of another CA", func(p *reloadPKI) { p.write(p.files.CRL, pemCRL(otherCA.CRL(t, 2))) }, "not signed by a CA"},
		{"expired server certificate", func(p *reloadPKI) {
			testcert.WriteFiles(t, p.dir, "server", p.ca.Issue(t, testcert.Leaf{CN: "late", IPs: testcert.Localhost, Server: true,
				NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}))
		}, "not now"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newReloadPKI(t, func(p *reloadPKI) []byte { return pemCRL(p.ca.CRL(t, 1, p.bob)) })
			tt.breakFiles(p)
			for range 3 {
				wantErrorContaining(t, p.reloader.Reload(), tt.want)
			}
			if got := p.reloads("failure"); got != 1 {
				t.Errorf("reloads{failure} %g after three polls of one broken file, want 1", got)
			}
			if n := p.logs.FilterMessage("TLS files changed but do not load; keeping the previous configuration").Len(); n != 1 {
				t.Errorf("%d error lines, want 1", n)
			}
			if cn := p.serverCN(p.alice); cn != "podsyncd" {
				t.Errorf("server certificate %q, want the previous one", cn)
			}
			if _, err := p.call(p.bob); err == nil {
				t.Error("bob, revoked by the previous CRL, connects")
			}

			// Repaired, the files load.
			p.writeServerCert("podsyncd-repaired")
			p.write(p.files.ClientCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Cert.Raw}))
			p.write(p.files.CRL, pemCRL(p.ca.CRL(t, 3)))
			if err := p.reloader.Reload(); err != nil {
				t.Fatalf("repaired files: %v", err)
			}
			if cn := p.serverCN(p.bob); cn != "podsyncd-repaired" {
				t.Errorf("server certificate %q after the repair, want podsyncd-repaired", cn)
			}
		})
	}
}
