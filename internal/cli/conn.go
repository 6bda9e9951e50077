package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"sigs.k8s.io/yaml"

	"github.com/podsync/podsync/client"
)

// defaultCallTimeout bounds single calls when --timeout is not given.
const defaultCallTimeout = 30 * time.Second

// fileConfig is the client config file (--config): where podsyncd is and
// how to reach it. Relative TLS paths are relative to the file's directory.
//
//	address: tcp://node-1.example:7443
//	tlsCertFile: client.pem
//	tlsKeyFile: client-key.pem
//	tlsCAFile: ca.pem
type fileConfig struct {
	// Address is podsyncd's address, as --address.
	Address string `json:"address,omitempty"`
	// TLSCertFile, TLSKeyFile and TLSCAFile are as --tls-cert-file,
	// --tls-key-file and --tls-ca-file.
	TLSCertFile string `json:"tlsCertFile,omitempty"`
	TLSKeyFile  string `json:"tlsKeyFile,omitempty"`
	TLSCAFile   string `json:"tlsCAFile,omitempty"`
	// Insecure is as --insecure.
	Insecure bool `json:"insecure,omitempty"`
}

// configFile returns the config file's path and whether it was named
// explicitly (then it must exist).
func (a *app) configFile() (string, bool) {
	if a.configPath != "" {
		return a.configPath, true
	}
	if p := a.getenv("PODSYNC_CONFIG"); p != "" {
		return p, true
	}
	dir := a.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := a.getenv("HOME")
		if home == "" {
			return "", false
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "podsync", "config.yaml"), false
}

// loadConfig reads the config file; a default file that does not exist is
// an empty configuration.
func (a *app) loadConfig() (fileConfig, error) {
	var fc fileConfig
	path, explicit := a.configFile()
	if path == "" {
		return fc, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return fc, nil
	}
	if err != nil {
		return fc, fmt.Errorf("config file: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &fc); err != nil {
		return fc, fmt.Errorf("config file %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for _, p := range []*string{&fc.TLSCertFile, &fc.TLSKeyFile, &fc.TLSCAFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return fc, nil
}

// client connects to podsyncd as the global flags, the environment and
// the config file say. The connection is made on the first call.
func (a *app) client(ctx context.Context) (*client.Client, error) {
	fc, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	addr := a.address
	if addr == "" {
		addr = a.getenv("PODSYNC_ADDRESS")
	}
	if addr == "" {
		addr = fc.Address
	}
	if addr == "" {
		addr = client.DefaultAddress
	}
	a.resolved = addr
	cert, key, ca := first(a.tlsCert, fc.TLSCertFile), first(a.tlsKey, fc.TLSKeyFile), first(a.tlsCA, fc.TLSCAFile)
	opts := []client.Option{client.WithUserAgent("podsyncctl/" + version())}
	if cert != "" || key != "" || ca != "" {
		opts = append(opts, client.WithTLSFiles(cert, key, ca))
	}
	if a.insecure || fc.Insecure {
		opts = append(opts, client.WithInsecure())
	}
	tcp := !strings.HasPrefix(addr, "unix:") && !strings.HasPrefix(addr, "/")
	if tcp && cert == "" && key == "" && ca == "" && !a.insecure && !fc.Insecure {
		return nil, usageErrorf("--address %s: TCP needs mutual TLS (--tls-cert-file, --tls-key-file, --tls-ca-file), "+
			"or --insecure for podsyncd's plaintext loopback listener", addr)
	}
	c, err := client.New(ctx, addr, opts...)
	if err != nil {
		return nil, usageError{fmt.Errorf("--address %s: %w", addr, err)}
	}
	return c, nil
}

func first(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// callContext bounds a single call by --timeout, or defaultCallTimeout.
func (a *app) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := a.timeout
	if d <= 0 {
		d = defaultCallTimeout
	}
	return context.WithTimeout(ctx, d)
}

// waitContext bounds a command that waits or follows by --timeout, if
// given.
func (a *app) waitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if a.timeout > 0 {
		return context.WithTimeout(ctx, a.timeout)
	}
	return context.WithCancel(ctx)
}

// writeError prints err as "error: …": the status message of a failed
// call, one line per field violation, and a hint when podsyncd cannot be
// reached. Further lines of a multi-line error are indented.
func (a *app) writeError(err error) {
	var b strings.Builder
	var ce *client.Error
	switch {
	case errors.As(err, &ce) && len(ce.Violations) > 0:
		b.WriteString("error: invalid request:\n")
		for _, v := range ce.Violations {
			// The API server's "Forbidden: " says nothing the
			// description does not; the status keeps it.
			fmt.Fprintf(&b, "  %s: %s\n", v.GetField(), strings.TrimPrefix(v.GetDescription(), "Forbidden: "))
		}
	case errors.As(err, &ce) && ce.Code == codes.Unavailable && ce.Reason == "":
		fmt.Fprintf(&b, "error: cannot reach podsyncd at %s: %s\n", a.resolved, orNone(ce.Message))
		b.WriteString("  Is podsyncd running? Set its address with --address or $PODSYNC_ADDRESS.\n")
	case errors.As(err, &ce):
		msg := ce.Message
		if msg == "" {
			msg = strings.ToLower(strings.ReplaceAll(ce.Code.String(), "_", " "))
		}
		if ce.Reason != "" && !strings.Contains(msg, ce.Reason) {
			msg += " (reason: " + ce.Reason + ")"
		}
		fmt.Fprintf(&b, "error: %s\n", msg)
	default:
		lines := strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
		fmt.Fprintf(&b, "error: %s\n", lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	_, _ = fmt.Fprint(a.stderr, b.String())
}
