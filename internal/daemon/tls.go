package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"
)

// ServerTLSConfig loads the TLS files of s into a server configuration for
// mTLS: TLS 1.2 or later, and a client certificate signed by one of
// TLSClientCAFile's CAs required and verified. It returns nil when no TLS
// file is set. The files are read once; replacing them needs a restart.
func (s Security) ServerTLSConfig() (*tls.Config, error) {
	if !s.tlsConfigured() {
		return nil, nil
	}
	if err := s.checkTLSFiles(); err != nil {
		return nil, err
	}
	return LoadServerTLS(s.TLSCertFile, s.TLSKeyFile, s.TLSClientCAFile, time.Now())
}

// LoadServerTLS builds the mTLS server configuration from PEM files. It
// refuses a server certificate that is not valid at now, and a CA file
// without certificates; every error names the file and its flag.
func LoadServerTLS(certFile, keyFile, clientCAFile string, now time.Time) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load --tls-cert-file %s and --tls-key-file %s: %w", certFile, keyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parse --tls-cert-file %s: %w", certFile, err)
		}
	}
	if now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("--tls-cert-file %s: certificate is valid from %s to %s, not now",
			certFile, leaf.NotBefore.Format(time.RFC3339), leaf.NotAfter.Format(time.RFC3339))
	}
	caPEM, err := os.ReadFile(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("read --tls-client-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("--tls-client-ca-file %s: no PEM certificate found", clientCAFile)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{"h2"},
	}, nil
}
