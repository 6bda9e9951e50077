package daemon_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/podsync/podsync/internal/daemon"
)

// pki writes a CA and a server certificate valid from notBefore to
// notAfter to dir, and returns the file names.
func pki(t *testing.T, dir string, notBefore, notAfter time.Time) (certFile, keyFile, caFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(72 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "podsyncd"},
		NotBefore: notBefore, NotAfter: notAfter, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("server.pem", "CERTIFICATE", der), write("server-key.pem", "EC PRIVATE KEY", keyDER), write("ca.pem", "CERTIFICATE", caDER)
}

func TestServerTLSConfig(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := pki(t, dir, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	sec := daemon.Security{TLSCertFile: cert, TLSKeyFile: key, TLSClientCAFile: ca}
	cfg, err := sec.ServerTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.RequireAndVerifyClientCert ||
		cfg.ClientCAs == nil || len(cfg.Certificates) != 1 {
		t.Errorf("config %+v: want TLS 1.2+, client certificates required and verified, one CA pool and certificate", cfg)
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
