//go:build integration

package daemon_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/daemon"
	"github.com/podsync/podsync/internal/testing/testcert"
)

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
	ca, otherCA := testcert.NewCA(t, "podsync itest CA"), testcert.NewCA(t, "another CA")
	srvCertFile, srvKeyFile := testcert.WriteFiles(t, dir, "server",
		ca.Issue(t, testcert.Leaf{CN: "podsyncd", IPs: testcert.Localhost, Server: true}))
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
			"--tls-cert-file=" + srvCertFile,
			"--tls-key-file=" + srvKeyFile,
			"--tls-client-ca-file=" + testcert.WritePEM(t, dir, "client-ca.crt", "CERTIFICATE", ca.Cert.Raw),
		},
	})

	dial := func(t *testing.T, certs ...tls.Certificate) podsyncv1.PodSyncServiceClient {
		t.Helper()
		// Present the certificate whatever CAs podsyncd asks for: Go's
		// client would otherwise send none of another CA.
		creds := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12,
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
			{"certificate of another CA", []tls.Certificate{otherCA.Issue(t, testcert.Leaf{CN: "itest-admin"})},
				"certificate signed by unknown authority"},
			{"expired certificate", []tls.Certificate{ca.Issue(t, testcert.Leaf{CN: "itest-admin",
				NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})},
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
		_, err := dial(t, ca.Issue(t, testcert.Leaf{CN: "itest-nobody"})).ListPods(ctx, &podsyncv1.ListPodsRequest{})
		if status.Code(err) != codes.PermissionDenied || errorReason(err) != errorinfo.ReasonPermissionDenied ||
			!strings.Contains(status.Convert(err).Message(), "cn:itest-nobody has no role") {
			t.Errorf("ListPods: %v; want PERMISSION_DENIED naming the identity", err)
		}
	})

	t.Run("read", func(t *testing.T) {
		c := dial(t, ca.Issue(t, testcert.Leaf{CN: "itest-reader"}))
		if _, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{}); err != nil {
			t.Errorf("ListPods: %v", err)
		}
		stream, err := c.SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pod})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.PermissionDenied || errorReason(err) != errorinfo.ReasonPermissionDenied {
			t.Errorf("SyncPod: %v; want PERMISSION_DENIED", err)
		}
		if _, err := c.DeletePod(ctx, ref); status.Code(err) != codes.PermissionDenied || errorReason(err) != errorinfo.ReasonPermissionDenied {
			t.Errorf("DeletePod: %v; want PERMISSION_DENIED", err)
		}
		if !d.logHas(`"finished call"`, `"identity":"cn:itest-reader"`, `"role":"read"`, `"grpc_code":"PermissionDenied"`) {
			t.Errorf("podsyncd did not log the refused calls with the identity and role")
		}
	})

	t.Run("admin", func(t *testing.T) {
		c := dial(t, ca.Issue(t, testcert.Leaf{CN: "itest-admin"}))
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
		if status.Code(err) != codes.Unauthenticated || errorReason(err) != errorinfo.ReasonUnauthenticated {
			t.Errorf("anonymous ListPods: %v; want UNAUTHENTICATED", err)
		}
	})
}

// TestMTLSReloadAndCRL: podsyncd, started with a CRL, takes a rotated
// server certificate and a new CRL on SIGHUP without a restart: the next
// connection sees the new certificate, the revoked client is refused
// (logged with its serial and identity) and another still connects.
func TestMTLSReloadAndCRL(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	ca := testcert.NewCA(t, "podsync itest CA")
	issueServer := func(cn string) (string, string) {
		return testcert.WriteFiles(t, dir, "server", ca.Issue(t, testcert.Leaf{CN: cn, IPs: testcert.Localhost, Server: true}))
	}
	srvCertFile, srvKeyFile := issueServer("podsyncd")
	crlFile := testcert.WritePEM(t, dir, "clients.crl", "X509 CRL", ca.CRL(t, 1))
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startPodsyncd(t, daemonOptions{
		ExtraListen: []string{"tcp://" + addr},
		Config: `
security:
  roles:
    read: ["cn:itest-reader", "cn:itest-revoked"]
`,
		Args: []string{
			"--tls-cert-file=" + srvCertFile,
			"--tls-key-file=" + srvKeyFile,
			"--tls-client-ca-file=" + testcert.WritePEM(t, dir, "client-ca.crt", "CERTIFICATE", ca.Cert.Raw),
			"--tls-crl-file=" + crlFile,
		},
	})
	reader := ca.Issue(t, testcert.Leaf{CN: "itest-reader"})
	revoked := ca.Issue(t, testcert.Leaf{CN: "itest-revoked"})
	// call connects anew and returns the server certificate's CN.
	call := func(cert tls.Certificate) (string, error) {
		creds := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}})
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		var p peer.Peer
		if _, err := podsyncv1.NewPodSyncServiceClient(conn).ListPods(ctx, &podsyncv1.ListPodsRequest{}, grpc.Peer(&p)); err != nil {
			return "", err
		}
		return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].Subject.CommonName, nil
	}
	for _, c := range []tls.Certificate{reader, revoked} {
		if cn, err := call(c); err != nil || cn != "podsyncd" {
			t.Fatalf("before the rotation: server %q, %v", cn, err)
		}
	}

	issueServer("podsyncd-rotated")
	testcert.WritePEM(t, dir, "clients.crl", "X509 CRL", ca.CRL(t, 2, revoked))
	d.Signal(syscall.SIGHUP)
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	eventually(lctx, t, "podsyncd reloads its TLS files", func() bool { return d.logHas(`"TLS files reloaded"`) })

	if cn, err := call(reader); err != nil || cn != "podsyncd-rotated" {
		t.Errorf("after SIGHUP: server %q, %v; want podsyncd-rotated", cn, err)
	}
	if _, err := call(revoked); status.Code(err) != codes.Unavailable {
		t.Errorf("revoked client: %v; want UNAVAILABLE from a refused handshake", err)
	}
	leaf, err := x509.ParseCertificate(revoked.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	eventually(lctx, t, "podsyncd logs the revoked client", func() bool {
		return d.logHas(`"client certificate revoked: connection refused"`,
			fmt.Sprintf(`"serial":"%X"`, leaf.SerialNumber), `"identity":"cn:itest-revoked"`)
	})
	if d.Exited() {
		t.Fatal("podsyncd exited on SIGHUP")
	}
}
