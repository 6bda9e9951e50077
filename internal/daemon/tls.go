package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/podsync/podsync/logx"
	"github.com/podsync/podsync/server"
)

// DefaultTLSReloadInterval is how often a TLSReloader reads its files
// again to see whether they changed.
const DefaultTLSReloadInterval = 5 * time.Second

// TLSFiles are the files of the mTLS configuration: the server's
// certificate and key and the client CAs (PEM), and optionally a CRL of
// those CAs (PEM or DER X.509 RevocationLists).
type TLSFiles struct {
	Cert, Key, ClientCA, CRL string
}

// files returns the files of s.
func (s Security) files() TLSFiles {
	return TLSFiles{Cert: s.TLSCertFile, Key: s.TLSKeyFile, ClientCA: s.TLSClientCAFile, CRL: s.TLSCRLFile}
}

// ServerTLSConfig loads the TLS files of s (see NewTLSReloader) and
// returns the reloader's configuration without starting the reload; nil
// when no TLS file is set.
func (s Security) ServerTLSConfig() (*tls.Config, error) {
	r, err := s.NewTLSReloader(nil)
	if err != nil || r == nil {
		return nil, err
	}
	return r.Config(), nil
}

// NewTLSReloader loads the TLS files of s into a TLSReloader, logging to
// log (nil: no logging). It returns nil, nil when no TLS file is set, and
// an error naming the file and its flag when one cannot be loaded.
func (s Security) NewTLSReloader(log *zap.Logger) (*TLSReloader, error) {
	if !s.tlsConfigured() {
		return nil, nil
	}
	if err := s.checkTLSFiles(); err != nil {
		return nil, err
	}
	return NewTLSReloader(s.files(), log)
}

// TLSReloader serves an mTLS server configuration built from TLSFiles —
// TLS 1.2 or later, a client certificate signed by one of the CAs
// required and verified, and not revoked by the CRL — and builds it again
// when the files change: every interval of Start, on SIGHUP, or on
// Reload. A connection takes the configuration current when it
// connects (tls.Config.GetConfigForClient); connections already open keep
// theirs. A changed file that does not load (a certificate and key that do
// not match, a CA file without certificates, a CRL not signed by one of
// the CAs) keeps the previous configuration; the error is logged, once
// per content, and counted.
type TLSReloader struct {
	files   TLSFiles
	log     *zap.Logger
	now     func() time.Time
	cur     atomic.Pointer[tlsState]
	mu      sync.Mutex   // serialises reloads
	failed  *tlsContents // the contents of the last failed load, logged once
	reloads *prometheus.CounterVec
}

// tlsState is one loaded configuration.
type tlsState struct {
	contents tlsContents // to see a change
	config   *tls.Config
	// revoked holds, per issuer (its raw subject), the serial numbers of
	// the certificates its CRL revokes.
	revoked map[string]map[string]bool
}

// NewTLSReloader loads files (Cert, Key and ClientCA required). It refuses
// a server certificate that is not valid now, a CA file without
// certificates and a CRL that no CA of ClientCA signed; every error names
// the file and its flag.
func NewTLSReloader(files TLSFiles, log *zap.Logger) (*TLSReloader, error) {
	if log == nil {
		log = zap.NewNop()
	}
	r := &TLSReloader{
		files: files, log: log, now: time.Now,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podsync_tls_reloads_total",
			Help: "Loads of the TLS files after a change, by result (success, or failure: the previous configuration is kept).",
		}, []string{"result"}),
	}
	contents, err := r.read()
	if err != nil {
		return nil, err
	}
	st, err := r.load(contents)
	if err != nil {
		return nil, err
	}
	r.cur.Store(st)
	return r, nil
}

// Register adds the reloads counter to reg.
func (r *TLSReloader) Register(reg prometheus.Registerer) error {
	r.reloads.WithLabelValues("success")
	r.reloads.WithLabelValues("failure")
	if err := reg.Register(r.reloads); err != nil {
		return fmt.Errorf("register TLS metrics: %w", err)
	}
	return nil
}

// Config returns the server configuration: its GetConfigForClient gives
// each connection the configuration current at that moment.
func (r *TLSReloader) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load().config, nil
		},
	}
}

// Start reloads the files every interval (DefaultTLSReloadInterval if not
// positive) and on SIGHUP until ctx ends or stop is called; stop returns
// once the reloading has stopped. SIGHUP is caught from the moment Start
// returns.
func (r *TLSReloader) Start(ctx context.Context, interval time.Duration) (stop func()) {
	if interval <= 0 {
		interval = DefaultTLSReloadInterval
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-hup:
				r.log.Info("SIGHUP: reloading the TLS files")
			}
			_ = r.Reload()
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// Reload reads the files and, if they changed, loads them. It returns
// the load's error, after which the previous configuration stays.
func (r *TLSReloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	contents, err := r.read()
	if err == nil && contents.equal(r.cur.Load().contents) {
		r.failed = nil // back as loaded: a new failure is news again
		return nil
	}
	var st *tlsState
	if err == nil {
		st, err = r.load(contents)
	}
	if err != nil {
		// A file being rewritten fails until it is complete: log and count
		// each broken content once, not at every poll.
		if r.failed == nil || !contents.equal(*r.failed) {
			r.failed = &contents
			r.reloads.WithLabelValues("failure").Inc()
			r.log.Error("TLS files changed but do not load; keeping the previous configuration", zap.Error(err))
		}
		return err
	}
	r.failed = nil
	r.cur.Store(st)
	r.reloads.WithLabelValues("success").Inc()
	leaf := st.config.Certificates[0].Leaf
	r.log.Info("TLS files reloaded", zap.String(logx.Subject, leaf.Subject.String()),
		zap.Time(logx.NotAfter, leaf.NotAfter), zap.Int("revoked_certificates", st.revokedCount()))
	return nil
}

// tlsContents are the contents of the files, in TLSFiles' order; nil for
// a file not configured.
type tlsContents [4][]byte

func (c tlsContents) equal(o tlsContents) bool {
	for i := range c {
		if !bytes.Equal(c[i], o[i]) || (c[i] == nil) != (o[i] == nil) {
			return false
		}
	}
	return true
}

// read returns the contents of the files.
func (r *TLSReloader) read() (tlsContents, error) {
	var c tlsContents
	for i, f := range []struct{ flag, name string }{
		{"--tls-cert-file", r.files.Cert}, {"--tls-key-file", r.files.Key},
		{"--tls-client-ca-file", r.files.ClientCA}, {"--tls-crl-file", r.files.CRL},
	} {
		if f.name == "" {
			continue
		}
		data, err := os.ReadFile(f.name)
		if err != nil {
			return tlsContents{}, fmt.Errorf("read %s: %w", f.flag, err)
		}
		c[i] = append([]byte{}, data...) // never nil
	}
	return c, nil
}

// load builds a configuration from the files' contents.
func (r *TLSReloader) load(contents tlsContents) (*tlsState, error) {
	certPEM, keyPEM, caPEM, crlData := contents[0], contents[1], contents[2], contents[3]
	f := r.files
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load --tls-cert-file %s and --tls-key-file %s: %w", f.Cert, f.Key, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parse --tls-cert-file %s: %w", f.Cert, err)
		}
	}
	if now := r.now(); now.After(cert.Leaf.NotAfter) || now.Before(cert.Leaf.NotBefore) {
		return nil, fmt.Errorf("--tls-cert-file %s: certificate is valid from %s to %s, not now",
			f.Cert, cert.Leaf.NotBefore.Format(time.RFC3339), cert.Leaf.NotAfter.Format(time.RFC3339))
	}
	cas, err := parseCertificates(caPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-client-ca-file %s: %w", f.ClientCA, err)
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	st := &tlsState{contents: contents}
	if crlData != nil {
		if st.revoked, err = parseCRLs(crlData, cas); err != nil {
			return nil, fmt.Errorf("--tls-crl-file %s: %w", f.CRL, err)
		}
	}
	st.config = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{"h2"},
	}
	if st.revoked != nil {
		st.config.VerifyConnection = func(cs tls.ConnectionState) error { return r.checkRevoked(st, cs) }
	}
	return st, nil
}

// parseCertificates returns the certificates of a PEM bundle.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return certs, nil
}

// parseCRLs parses the CRLs of data (PEM "X509 CRL" blocks, or one DER
// CRL), checks that each is signed by one of cas, and returns the serial
// numbers each issuer revokes.
func parseCRLs(data []byte, cas []*x509.Certificate) (map[string]map[string]bool, error) {
	var ders [][]byte
	if rest := bytes.TrimSpace(data); bytes.HasPrefix(rest, []byte("-----BEGIN")) {
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if b.Type == "X509 CRL" {
				ders = append(ders, b.Bytes)
			}
		}
		if len(ders) == 0 {
			return nil, errors.New(`no PEM "X509 CRL" block found`)
		}
	} else {
		ders = [][]byte{data}
	}
	revoked := map[string]map[string]bool{}
	for i, der := range ders {
		crl, err := x509.ParseRevocationList(der)
		if err != nil {
			return nil, fmt.Errorf("parse CRL %d: %w", i+1, err)
		}
		var issuer *x509.Certificate
		for _, ca := range cas {
			if crl.CheckSignatureFrom(ca) == nil {
				issuer = ca
				break
			}
		}
		if issuer == nil {
			return nil, fmt.Errorf("CRL %d of %q is not signed by a CA of --tls-client-ca-file", i+1, crl.Issuer.String())
		}
		serials := revoked[string(issuer.RawSubject)]
		if serials == nil {
			serials = map[string]bool{}
			revoked[string(issuer.RawSubject)] = serials
		}
		for _, e := range crl.RevokedCertificateEntries {
			serials[e.SerialNumber.String()] = true
		}
	}
	return revoked, nil
}

func (st *tlsState) revokedCount() int {
	n := 0
	for _, serials := range st.revoked {
		n += len(serials)
	}
	return n
}

// checkRevoked refuses a connection whose client certificate, or an
// intermediate of its chain, its issuer's CRL revokes.
func (r *TLSReloader) checkRevoked(st *tlsState, cs tls.ConnectionState) error {
	for _, chain := range cs.VerifiedChains {
		for i := 0; i+1 < len(chain); i++ {
			c, issuer := chain[i], chain[i+1]
			if !st.revoked[string(issuer.RawSubject)][c.SerialNumber.String()] {
				continue
			}
			id := server.CertificateIdentity(chain[0])
			serial := fmt.Sprintf("%X", c.SerialNumber)
			r.log.Warn("client certificate revoked: connection refused", zap.String(logx.Serial, serial),
				zap.String(logx.Identity, id.String()), zap.String(logx.Subject, c.Subject.String()),
				zap.String(logx.Issuer, issuer.Subject.String()))
			return fmt.Errorf("client certificate %s (serial %s) of %s is revoked by --tls-crl-file", c.Subject, serial, id)
		}
	}
	return nil
}
