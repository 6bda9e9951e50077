package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/podsync/podsync/server"
)

// DefaultSocket is the default listen address.
const DefaultSocket = "unix:///run/podsync/podsync.sock"

// ServerConfig is the listener and security part of podsyncd's
// configuration. Its JSON names are the keys of the YAML config file
// (--config); flags set on the command line override the file.
type ServerConfig struct {
	// Listen are the addresses to serve on (--listen, repeatable):
	// "unix:///path" or "tcp://host:port". Default DefaultSocket.
	Listen []string `json:"listen,omitempty"`
	// MetricsAddress is the host:port of the Prometheus endpoint
	// (--metrics-address); empty means none. It is plain HTTP without
	// authentication (and serves pprof with EnableProfiling), so it must
	// be a loopback address unless MetricsAllowRemote.
	MetricsAddress string `json:"metricsAddress,omitempty"`
	// MetricsAllowRemote lets MetricsAddress be any address
	// (--metrics-allow-remote).
	MetricsAllowRemote bool `json:"metricsAllowRemote,omitempty"`
	// EnableProfiling serves net/http/pprof under /debug/pprof/ on the
	// metrics server (--enable-profiling); it needs MetricsAddress.
	EnableProfiling bool `json:"enableProfiling,omitempty"`
	// Security configures who may connect and what they may do.
	Security `json:"security"`
}

// Security configures podsyncd's listeners and callers.
type Security struct {
	// TLSCertFile and TLSKeyFile are the server's certificate and key in
	// PEM (--tls-cert-file, --tls-key-file), and TLSClientCAFile the CAs
	// whose client certificates are accepted (--tls-client-ca-file). All
	// three or none; a TCP listener needs them (mTLS).
	TLSCertFile     string `json:"tlsCertFile,omitempty"`
	TLSKeyFile      string `json:"tlsKeyFile,omitempty"`
	TLSClientCAFile string `json:"tlsClientCAFile,omitempty"`
	// TLSCRLFile is an optional CRL of the client CAs (--tls-crl-file),
	// PEM or DER X.509 RevocationLists each signed by one of them: a
	// client certificate it revokes is refused at the handshake. All four
	// files are read again when they change (TLSReloader).
	TLSCRLFile string `json:"tlsCRLFile,omitempty"`
	// InsecureListenLoopback allows a plaintext TCP listener on a loopback
	// address when TLS is not configured (--insecure-listen-loopback; for
	// development). Its callers are "anonymous" (see server.Roles).
	InsecureListenLoopback bool `json:"insecureListenLoopback,omitempty"`
	// SocketGroup owns unix sockets, by name or gid (--socket-group);
	// empty keeps podsyncd's group. Members may connect (mode 0660).
	SocketGroup string `json:"socketGroup,omitempty"`
	// Roles map caller identities to roles (config file only).
	Roles server.Roles `json:"roles"`
	// RateLimit bounds each identity's mutating calls (config file only).
	RateLimit server.RateLimit `json:"rateLimit"`
	// MaxStreamsPerIdentity bounds each identity's open WatchPods and
	// GetContainerLogs streams (config file only); 0 means
	// server.DefaultMaxStreamsPerIdentity.
	MaxStreamsPerIdentity int `json:"maxStreamsPerIdentity,omitempty"`
}

// DefaultServerConfig returns the defaults.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{Listen: []string{DefaultSocket}}
}

// AddFlags binds the flags of c to fs, with c's values as defaults. Set c
// from the config file first, then parse: flags given win.
func (c *ServerConfig) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&c.Listen, "listen", c.Listen,
		`address to serve on, "unix:///path" or "tcp://host:port" (TCP needs mTLS or --insecure-listen-loopback); repeatable`)
	fs.BoolVar(&c.MetricsAllowRemote, "metrics-allow-remote", c.MetricsAllowRemote,
		"let --metrics-address be a non-loopback address (metrics and pprof are plain, unauthenticated HTTP)")
	fs.StringVar(&c.MetricsAddress, "metrics-address", c.MetricsAddress,
		"host:port to serve Prometheus metrics on (/metrics); empty disables")
	fs.BoolVar(&c.EnableProfiling, "enable-profiling", c.EnableProfiling,
		"serve Go profiles (net/http/pprof, /debug/pprof/) on --metrics-address")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "server certificate (PEM) for TCP listeners")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", c.TLSKeyFile, "server private key (PEM) for TCP listeners")
	fs.StringVar(&c.TLSClientCAFile, "tls-client-ca-file", c.TLSClientCAFile,
		"CA certificates (PEM) that sign accepted client certificates; TCP callers must present one")
	fs.StringVar(&c.TLSCRLFile, "tls-crl-file", c.TLSCRLFile,
		"CRL (PEM or DER) of the client CAs; client certificates it revokes are refused (reloaded on change)")
	fs.BoolVar(&c.InsecureListenLoopback, "insecure-listen-loopback", c.InsecureListenLoopback,
		"DEVELOPMENT ONLY: allow a plaintext TCP listener on a loopback address when TLS is not configured")
	fs.StringVar(&c.SocketGroup, "socket-group", c.SocketGroup,
		"group (name or gid) that owns unix sockets; its members may connect")
}

// Validate checks the configuration without touching the file system: the
// listen addresses, TLS files all or none, every TCP listener secured (or
// loopback with InsecureListenLoopback), and the roles.
func (c ServerConfig) Validate(ctx context.Context) error {
	var errs []error
	if len(c.Listen) == 0 {
		errs = append(errs, errors.New("listen: at least one address is required"))
	}
	if err := c.checkTLSFiles(); err != nil {
		errs = append(errs, err)
	}
	for _, addr := range c.Listen {
		a, err := ParseAddress(addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if a.Network == "tcp" {
			if _, err := c.tcpAddress(ctx, a); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := c.Roles.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tlsConfigured reports whether any TLS file is set.
func (s Security) tlsConfigured() bool {
	return s.TLSCertFile != "" || s.TLSKeyFile != "" || s.TLSClientCAFile != "" || s.TLSCRLFile != ""
}

func (s Security) checkTLSFiles() error {
	if !s.tlsConfigured() {
		return nil
	}
	var missing []string
	for _, f := range []struct{ flag, value string }{
		{"--tls-cert-file", s.TLSCertFile},
		{"--tls-key-file", s.TLSKeyFile},
		{"--tls-client-ca-file", s.TLSClientCAFile},
	} {
		if f.value == "" {
			missing = append(missing, f.flag)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("tls: %v missing: mTLS needs --tls-cert-file, --tls-key-file and --tls-client-ca-file together"+
			" (and --tls-crl-file needs them)", missing)
	}
	return nil
}

// Apply sets the security fields of opts: TLS (loaded from the files),
// InsecureLoopback, Roles, RateLimit and MaxStreamsPerIdentity. It
// returns the TLSReloader behind opts.TLS (nil without TLS), logging to
// log, for the caller to Start.
func (s Security) Apply(opts *server.Options, log *zap.Logger) (*TLSReloader, error) {
	r, err := s.NewTLSReloader(log)
	if err != nil {
		return nil, err
	}
	opts.TLS = nil
	if r != nil {
		opts.TLS = r.Config()
	}
	opts.InsecureLoopback = s.InsecureListenLoopback && r == nil
	opts.Roles = s.Roles
	opts.RateLimit = s.RateLimit
	opts.MaxStreamsPerIdentity = s.MaxStreamsPerIdentity
	return r, nil
}
