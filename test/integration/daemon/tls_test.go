//go:build integration

package daemon_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/internal/daemon"
	"github.com/podsync/podsync/server"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-24 * time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// leaf describes a certificate ca issues.
type leaf struct {
	cn                  string
	server              bool
	notBefore, notAfter time.Time // zero: an hour ago, in an hour
}

func (ca *testCA) issue(t *testing.T, l leaf) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if l.notBefore.IsZero() {
		l.notBefore = time.Now().Add(-time.Hour)
	}
	if l.notAfter.IsZero() {
		l.notAfter = time.Now().Add(time.Hour)
	}
	sn, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: l.cn},
		NotBefore:    l.notBefore,
		NotAfter:     l.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if l.server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// writePEM writes a file of PEM blocks of typ and returns its path.
func writePEM(t *testing.T, dir, name, typ string, ders ...[]byte) string {
	t.Helper()
	var b []byte
	for _, der := range ders {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})...)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// errorReason returns the google.rpc.ErrorInfo reason of err.
func errorReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// TestMTLS serves podsyncd on TCP with mTLS and a roles config, and calls
// it as operators' clients would: with no certificate, one of another CA,
// an expired one, and valid ones of an identity without a role, a read
// identity and an admin identity.
func TestMTLS(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	ca, otherCA := newTestCA(t, "podsync itest CA"), newTestCA(t, "another CA")
	srvCert := ca.issue(t, leaf{cn: "podsyncd", server: true})
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvCert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startPodsyncd(t, daemonOptions{
		ExtraListen: []string{"tcp://" + addr},
		Config: `
security:
  roles:
    admin: ["cn:itest-admin"]
    read: ["cn:itest-reader"]
`,
		Args: []string{
			"--tls-cert-file=" + writePEM(t, dir, "server.crt", "CERTIFICATE", srvCert.Certificate[0]),
			"--tls-key-file=" + writePEM(t, dir, "server.key", "PRIVATE KEY", keyDER),
			"--tls-client-ca-file=" + writePEM(t, dir, "client-ca.crt", "CERTIFICATE", ca.cert.Raw),
		},
	})

	dial := func(t *testing.T, certs ...tls.Certificate) podsyncv1.PodSyncServiceClient {
		t.Helper()
		// Present the certificate whatever CAs podsyncd asks for: Go's
		// client would otherwise send none of another CA.
		creds := credentials.NewTLS(&tls.Config{RootCAs: ca.pool(), MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if len(certs) == 0 {
					return &tls.Certificate{}, nil
				}
				return &certs[0], nil
			}})
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return podsyncv1.NewPodSyncServiceClient(conn)
	}

	t.Run("refused", func(t *testing.T) {
		for _, tt := range []struct {
			name  string
			certs []tls.Certificate
			// why is how podsyncd logs the refusal; the client sees only
			// a failed connection (with TLS 1.3 often a bare broken pipe).
			why string
		}{
			{"no client certificate", nil, "client didn't provide a certificate"},
			{"certificate of another CA", []tls.Certificate{otherCA.issue(t, leaf{cn: "itest-admin"})},
				"certificate signed by unknown authority"},
			{"expired certificate", []tls.Certificate{ca.issue(t, leaf{cn: "itest-admin",
				notBefore: time.Now().Add(-48 * time.Hour), notAfter: time.Now().Add(-24 * time.Hour)})},
				"certificate has expired or is not yet valid: current time"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				_, err := dial(t, tt.certs...).ListPods(ctx, &podsyncv1.ListPodsRequest{})
				if status.Code(err) != codes.Unavailable {
					t.Errorf("ListPods: %v; want UNAVAILABLE from a refused TLS handshake", err)
				}
				lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				eventually(lctx, t, "podsyncd logs the refusal: "+tt.why, func() bool {
					return d.logHas(`"tls handshake refused"`, tt.why)
				})
			})
		}
		if d.logHas(`"finished call"`, `"cn:itest-admin"`) {
			t.Errorf("a refused certificate made a call")
		}
	})

	pod := newPod(t, "", sleeper("app"))
	ref := &podsyncv1.DeletePodRequest{Namespace: pod.GetMetadata().GetNamespace(), Name: pod.GetMetadata().GetName(), GracePeriodSeconds: ptr.To[int64](0)}

	t.Run("identity without role", func(t *testing.T) {
		_, err := dial(t, ca.issue(t, leaf{cn: "itest-nobody"})).ListPods(ctx, &podsyncv1.ListPodsRequest{})
		if status.Code(err) != codes.PermissionDenied || errorReason(err) != server.ReasonPermissionDenied ||
			!strings.Contains(status.Convert(err).Message(), "cn:itest-nobody has no role") {
			t.Errorf("ListPods: %v; want PERMISSION_DENIED naming the identity", err)
		}
	})

	t.Run("read", func(t *testing.T) {
		c := dial(t, ca.issue(t, leaf{cn: "itest-reader"}))
		if _, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{}); err != nil {
			t.Errorf("ListPods: %v", err)
		}
		stream, err := c.SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pod})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.PermissionDenied || errorReason(err) != server.ReasonPermissionDenied {
			t.Errorf("SyncPod: %v; want PERMISSION_DENIED", err)
		}
		if _, err := c.DeletePod(ctx, ref); status.Code(err) != codes.PermissionDenied || errorReason(err) != server.ReasonPermissionDenied {
			t.Errorf("DeletePod: %v; want PERMISSION_DENIED", err)
		}
		if !d.logHas(`"finished call"`, `"identity":"cn:itest-reader"`, `"role":"read"`, `"grpc_code":"PermissionDenied"`) {
			t.Errorf("podsyncd did not log the refused calls with the identity and role")
		}
	})

	t.Run("admin", func(t *testing.T) {
		c := dial(t, ca.issue(t, leaf{cn: "itest-admin"}))
		stream, err := c.SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pod})
		if err != nil {
			t.Fatal(err)
		}
		if res := lastSyncResult(t, stream); res.GetStatus().GetPhase() != "Running" || !res.GetCreated() {
			t.Errorf("SyncPod: created %t, phase %q; want a new Running pod", res.GetCreated(), res.GetStatus().GetPhase())
		}
		resp, err := c.DeletePod(ctx, ref)
		if err != nil || !resp.GetFound() {
			t.Errorf("DeletePod: %v, found %t", err, resp.GetFound())
		}
		if err := removePodCgroups(pod.GetMetadata().GetUid()); err != nil {
			t.Error(err)
		}
	})
}

// TestListenerSecurity: podsyncd refuses to start with a TCP listener
// without mTLS, and with --insecure-listen-loopback on an address that is
// not loopback; plaintext on loopback starts, and its anonymous callers
// are refused unless the roles name them.
func TestListenerSecurity(t *testing.T) {
	port := freePort(t)
	base := []string{
		"--runtime-endpoint=" + inst.Endpoint(), "--root-dir=" + t.TempDir(), "--pod-log-dir=" + t.TempDir(),
		"--node-name=itest", "--node-ip=127.0.0.1",
	}
	for _, tt := range []struct {
		name, listen string
		insecure     bool
		want         string
	}{
		{"tcp without TLS", fmt.Sprintf("tcp://127.0.0.1:%d", port), false,
			"a TCP listener needs mTLS (--tls-cert-file, --tls-key-file, --tls-client-ca-file)"},
		{"insecure on every interface", fmt.Sprintf("tcp://0.0.0.0:%d", port), true,
			"0.0.0.0 is not a loopback address; plaintext is allowed on loopback only"},
		{"insecure with an empty host", fmt.Sprintf("tcp://:%d", port), true, "an empty host means every interface"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--listen=" + tt.listen}, base...)
			if tt.insecure {
				args = append(args, "--insecure-listen-loopback")
			}
			code, stderr := runToExit(t, args...)
			if code != daemon.ExitUsage || !strings.HasPrefix(stderr, "podsyncd: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, daemon.ExitUsage, tt.want)
			}
			if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
				_ = c.Close()
				t.Errorf("something listens on port %d", port)
			}
		})
	}

	t.Run("insecure on loopback", func(t *testing.T) {
		ctx := testContext(t)
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		startPodsyncd(t, daemonOptions{ExtraListen: []string{"tcp://" + addr}, Args: []string{"--insecure-listen-loopback"}})
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		_, err = podsyncv1.NewPodSyncServiceClient(conn).ListPods(ctx, &podsyncv1.ListPodsRequest{})
		if status.Code(err) != codes.Unauthenticated || errorReason(err) != server.ReasonUnauthenticated {
			t.Errorf("anonymous ListPods: %v; want UNAUTHENTICATED", err)
		}
	})
}
