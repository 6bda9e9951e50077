package daemon_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/podsync/podsync/internal/daemon"
	"github.com/podsync/podsync/internal/testing/testcert"
)

// pki writes a CA and a server certificate valid from notBefore to
// notAfter to dir, and returns the file names.
func pki(t *testing.T, dir string, notBefore, notAfter time.Time) (certFile, keyFile, caFile string) {
	t.Helper()
	ca := testcert.NewCA(t, "test CA")
	certFile, keyFile = testcert.WriteFiles(t, dir, "server", ca.Issue(t, testcert.Leaf{
		CN: "podsyncd", IPs: testcert.Localhost, Server: true, NotBefore: notBefore, NotAfter: notAfter,
	}))
	return certFile, keyFile, testcert.WritePEM(t, dir, "ca.pem", "CERTIFICATE", ca.Cert.Raw)
}

func TestServerTLSConfig(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := pki(t, dir, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	sec := daemon.Security{TLSCertFile: cert, TLSKeyFile: key, TLSClientCAFile: ca}
	cfg, err := sec.ServerTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.GetConfigForClient == nil {
		t.Errorf("config %+v: want TLS 1.2+, client certificates required and verified, a configuration per connection", cfg)
	}
	conn, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil || conn.MinVersion != tls.VersionTLS12 || conn.ClientAuth != tls.RequireAndVerifyClientCert ||
		conn.ClientCAs == nil || len(conn.Certificates) != 1 {
		t.Errorf("connection's config %+v (%v): want TLS 1.2+, client certificates required and verified, one CA pool and certificate", conn, err)
	}

	if cfg, err := (daemon.Security{}).ServerTLSConfig(); cfg != nil || err != nil {
		t.Errorf("no TLS files: %v, %v; want nil, nil", cfg, err)
	}

	notPEM := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	oldCert, oldKey, _ := pki(t, t.TempDir(), time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	for _, tt := range []struct {
		name string
		sec  daemon.Security
		want string
	}{
		{"missing key flag", daemon.Security{TLSCertFile: cert, TLSClientCAFile: ca}, "--tls-key-file"},
		{"missing CA flag", daemon.Security{TLSCertFile: cert, TLSKeyFile: key}, "--tls-client-ca-file"},
		{"unreadable cert", daemon.Security{TLSCertFile: filepath.Join(dir, "nope.pem"), TLSKeyFile: key, TLSClientCAFile: ca}, "--tls-cert-file"},
		{"key of another cert", daemon.Security{TLSCertFile: cert, TLSKeyFile: oldKey, TLSClientCAFile: ca}, "--tls-key-file"},
		{"unreadable CA", daemon.Security{TLSCertFile: cert, TLSKeyFile: key, TLSClientCAFile: filepath.Join(dir, "nope.pem")}, "--tls-client-ca-file"},
		{"CA without certificates", daemon.Security{TLSCertFile: cert, TLSKeyFile: key, TLSClientCAFile: notPEM}, "no PEM certificate"},
		{"expired server certificate", daemon.Security{TLSCertFile: oldCert, TLSKeyFile: oldKey, TLSClientCAFile: ca}, "not now"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.sec.ServerTLSConfig()
			wantErrorContaining(t, err, tt.want)
		})
	}
}
