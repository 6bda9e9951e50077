package localkube

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the files of the control plane's certificates, in one directory.
type pki struct {
	dir string
	ca  *x509.Certificate
	key crypto.Signer
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// newPKI makes a CA in dir and the certificates the control plane needs:
// apiserver.{crt,key} (serving 127.0.0.1, localhost and the in-cluster
// names), admin.{crt,key} (CN admin, O system:masters),
// apiserver-kubelet-client.{crt,key}, sa.{key,pub}; and, as kubeadm makes
// them for the aggregation layer, front-proxy-ca.{crt,key} and
// front-proxy-client.{crt,key}, the API server's client certificate
// towards aggregated API servers (metrics-server).
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make pki directory: %w", err)
	}
	p, err := newCA(dir, "ca", "localkube-ca")
	if err != nil {
		return nil, err
	}
	fp, err := newCA(dir, "front-proxy-ca", "localkube-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	if err := fp.issue("front-proxy-client", leaf{cn: "front-proxy-client"}); err != nil {
		return nil, err
	}
	if err := p.issue("apiserver", leaf{
		cn: "kube-apiserver", server: true,
		dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		ips: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 250, 0, 1)},
	}); err != nil {
		return nil, err
	}
	if err := p.issue("admin", leaf{cn: "admin", orgs: []string{"system:masters"}}); err != nil {
		return nil, err
	}
	// The apiserver's client certificate for kubelets' APIs (logs, exec):
	// podsync-vk checks it against ca.crt, then asks the apiserver.
	if err := p.issue("apiserver-kubelet-client", leaf{cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}}); err != nil {
		return nil, err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	if err := writeKey(p.path("sa.key"), sa); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("marshal service-account public key: %w", err)
	}
	if err := writePEM(p.path("sa.pub"), "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	return p, nil
}

// newCA makes a self-signed CA, name.crt and name.key in dir, and returns
// the pki that issues from it.
func newCA(dir, name, cn string) (*pki, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", name, err)
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create %s certificate: %w", name, err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse %s certificate: %w", name, err)
	}
	p := &pki{dir: dir, ca: ca, key: key}
	if err := writePEM(p.path(name+".crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writeKey(p.path(name+".key"), key); err != nil {
		return nil, err
	}
	return p, nil
}

// leaf describes a certificate the CA issues.
type leaf struct {
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	server bool
}

var serial int64 = 1

// issue writes name.crt and name.key, a certificate l describes signed by
// the CA.
func (p *pki) issue(name string, l leaf) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate %s key: %w", name, err)
	}
	serial++
	usage := x509.ExtKeyUsageClientAuth
	if l.server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: l.cn, Organization: l.orgs},
		DNSNames:     l.dns,
		IPAddresses:  l.ips,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		return fmt.Errorf("create %s certificate: %w", name, err)
	}
	if err := writePEM(p.path(name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(p.path(name+".key"), key)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal key %s: %w", path, err)
	}
	return writePEM(path, "PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
