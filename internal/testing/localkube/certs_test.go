package localkube

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"slices"
	"testing"
)

func TestPKI(t *testing.T) {
	p, err := newPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	load := func(name string) *x509.Certificate {
		t.Helper()
		kp, err := tls.LoadX509KeyPair(p.path(name+".crt"), p.path(name+".key"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c, err := x509.ParseCertificate(kp.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	api := load("apiserver")
	for _, host := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc"} {
		if _, err := api.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("apiserver certificate for %s: %v", host, err)
		}
	}
	for _, name := range []string{"admin", "apiserver-kubelet-client"} {
		c := load(name)
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s client certificate: %v", name, err)
		}
		if !slices.Contains(c.Subject.Organization, "system:masters") {
			t.Errorf("%s groups = %v, want system:masters", name, c.Subject.Organization)
		}
	}
	// The aggregation layer's: the API server's client certificate
	// towards aggregated API servers, of its own CA (the request-header
	// CA they trust), not the cluster's.
	fpca, err := os.ReadFile(p.path("front-proxy-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	fpPool := x509.NewCertPool()
	if !fpPool.AppendCertsFromPEM(fpca) {
		t.Fatal("front-proxy-ca.crt holds no certificate")
	}
	fp := load("front-proxy-client")
	if _, err := fp.Verify(x509.VerifyOptions{Roots: fpPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || fp.Subject.CommonName != "front-proxy-client" {
		t.Errorf("front-proxy-client certificate %q: %v", fp.Subject.CommonName, err)
	}
	if _, err := fp.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("the front-proxy client certificate verifies against the cluster CA: an aggregated API server would take any client of the cluster CA for the API server")
	}
	for _, f := range []string{"sa.key", "sa.pub", "ca.key", "front-proxy-ca.key", "front-proxy-client.key"} {
		st, err := os.Stat(p.path(f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %o, want 0600", f, st.Mode().Perm())
		}
	}
}
