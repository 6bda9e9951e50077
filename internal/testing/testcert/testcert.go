package testcert

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
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA returns a CA named name, valid from a day ago to a day from now.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-24 * time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key}
}

// Pool returns a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf describes a certificate the CA issues.
type Leaf struct {
	CN       string
	DNSNames []string
	URIs     []string
	IPs      []net.IP
	// Server makes a server certificate; otherwise it is a client's.
	Server bool
	// NotBefore and NotAfter default to an hour ago and in an hour.
	NotBefore, NotAfter time.Time
}

// Localhost is the address of test servers' certificates.
var Localhost = []net.IP{net.IPv4(127, 0, 0, 1)}

// Issue returns the certificate l describes, signed by the CA, with its
// key.
func (ca *CA) Issue(t testing.TB, l Leaf) tls.Certificate {
	t.Helper()
	key := newKey(t)
	if l.NotBefore.IsZero() {
		l.NotBefore = time.Now().Add(-time.Hour)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = time.Now().Add(time.Hour)
	}
	sn, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: l.CN},
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		DNSNames:     l.DNSNames,
		IPAddresses:  l.IPs,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if l.Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	for _, u := range l.URIs {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// CRL returns a CRL (DER) of the CA, numbered number, that revokes the
// certificates given.
func (ca *CA) CRL(t testing.TB, number int64, revoked ...tls.Certificate) []byte {
	t.Helper()
	tmpl := &x509.RevocationList{
		Number:     big.NewInt(number),
		ThisUpdate: time.Now().Add(-time.Minute),
		NextUpdate: time.Now().Add(time.Hour),
	}
	for _, c := range revoked {
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: leaf.SerialNumber, RevocationTime: time.Now()})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// WriteFiles writes c's certificate and its key (PKCS #8) as PEM files
// name.crt and name.key in dir and returns their paths.
func WriteFiles(t testing.TB, dir, name string, c tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return WritePEM(t, dir, name+".crt", "CERTIFICATE", c.Certificate...), WritePEM(t, dir, name+".key", "PRIVATE KEY", keyDER)
}

// WritePEM writes a file of PEM blocks of typ in dir and returns its path.
func WritePEM(t testing.TB, dir, name, typ string, ders ...[]byte) string {
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

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
