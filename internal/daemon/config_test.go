package daemon_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/podsync/podsync/internal/daemon"
	"github.com/podsync/podsync/server"
)

const configYAML = `
listen:
  - unix:///run/podsync/podsync.sock
  - tcp://0.0.0.0:7443
metricsAddress: 127.0.0.1:9090
security:
  tlsCertFile: /etc/podsync/tls/server.pem
  tlsKeyFile: /etc/podsync/tls/server-key.pem
  tlsClientCAFile: /etc/podsync/tls/clients-ca.pem
  tlsCRLFile: /etc/podsync/tls/clients.crl
  socketGroup: podsync
  roles:
    admin: ["cn:control-plane", "uid:0"]
    read: ["dns:monitor.example.com", "user:prometheus"]
  rateLimit:
    perSecond: 5
    burst: 10
    read: {perSecond: 50, burst: 80, planPodCost: 8}
`

func TestServerConfigFileThenFlags(t *testing.T) {
	cfg := daemon.DefaultServerConfig()
	if err := yaml.UnmarshalStrict([]byte(configYAML), &cfg); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("podsyncd", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse([]string{"--socket-group=4242", "--listen=unix:///run/p.sock", "--listen=tcp://127.0.0.1:7443"}); err != nil {
		t.Fatal(err)
	}
	want := daemon.ServerConfig{
		Listen:         []string{"unix:///run/p.sock", "tcp://127.0.0.1:7443"},
		MetricsAddress: "127.0.0.1:9090",
		Security: daemon.Security{
			TLSCertFile:     "/etc/podsync/tls/server.pem",
			TLSKeyFile:      "/etc/podsync/tls/server-key.pem",
			TLSClientCAFile: "/etc/podsync/tls/clients-ca.pem",
			TLSCRLFile:      "/etc/podsync/tls/clients.crl",
			SocketGroup:     "4242",
			Roles: server.Roles{
				Admin: []string{"cn:control-plane", "uid:0"},
				Read:  []string{"dns:monitor.example.com", "user:prometheus"},
			},
			RateLimit: server.RateLimit{PerSecond: 5, Burst: 10,
				Read: server.ReadRateLimit{PerSecond: 50, Burst: 80, PlanPodCost: 8}},
		},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if err := cfg.Validate(testContext(t)); err != nil {
		t.Errorf("Validate: %v", err)
	}

	if err := yaml.UnmarshalStrict([]byte("security:\n  tlsCert: x\n"), &cfg); err == nil {
		t.Error("an unknown key is accepted")
	}
}

func TestServerConfigValidate(t *testing.T) {
	if err := daemon.DefaultServerConfig().Validate(testContext(t)); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for _, tt := range []struct {
		name string
		cfg  daemon.ServerConfig
		want string
	}{
		{"no listener", daemon.ServerConfig{}, "at least one address"},
		{"bad address", daemon.ServerConfig{Listen: []string{"udp://x:1"}}, "scheme"},
		{"tcp without TLS", daemon.ServerConfig{Listen: []string{"tcp://127.0.0.1:7443"}}, "needs mTLS"},
		{"plaintext off loopback", daemon.ServerConfig{
			Listen:   []string{"tcp://0.0.0.0:7443"},
			Security: daemon.Security{InsecureListenLoopback: true},
		}, "loopback"},
		{"partial TLS", daemon.ServerConfig{
			Listen:   []string{daemon.DefaultSocket},
			Security: daemon.Security{TLSKeyFile: "k.pem"},
		}, "--tls-cert-file"},
		{"CRL without mTLS", daemon.ServerConfig{
			Listen:   []string{daemon.DefaultSocket},
			Security: daemon.Security{TLSCRLFile: "clients.crl"},
		}, "--tls-crl-file needs them"},
		{"bad role", daemon.ServerConfig{
			Listen:   []string{daemon.DefaultSocket},
			Security: daemon.Security{Roles: server.Roles{Read: []string{"uid:root"}}},
		}, "roles.read[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantErrorContaining(t, tt.cfg.Validate(testContext(t)), tt.want)
		})
	}
}

func TestSecurityApply(t *testing.T) {
	var opts server.Options
	sec := daemon.Security{
		InsecureListenLoopback: true,
		Roles:                  server.Roles{Admin: []string{"anonymous"}},
		RateLimit:              server.RateLimit{PerSecond: 1},
	}
	if r, err := sec.Apply(&opts, nil); err != nil || r != nil {
		t.Fatalf("Apply without TLS: %v, %v; want no reloader, no error", r, err)
	}
	if opts.TLS != nil || !opts.InsecureLoopback || len(opts.Roles.Admin) != 1 || opts.RateLimit.PerSecond != 1 {
		t.Errorf("options %+v", opts)
	}
	if _, err := (daemon.Security{TLSCertFile: "/nonexistent.pem"}).Apply(&opts, nil); err == nil {
		t.Error("Apply with partial TLS: no error")
	}
}

// TestNodeLimitFlags: the node's own limits are flags (and config keys),
// defaulting to the validation defaults, refused when not positive.
func TestNodeLimitFlags(t *testing.T) {
	cfg := daemon.DefaultConfig()
	if cfg.MaxContainersPerPod != server.DefaultMaxContainersPerPod || cfg.MaxGracePeriodSeconds != server.DefaultMaxGracePeriodSeconds {
		t.Errorf("defaults %d, %d", cfg.MaxContainersPerPod, cfg.MaxGracePeriodSeconds)
	}
	fs := pflag.NewFlagSet("podsyncd", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse([]string{"--max-containers-per-pod=128", "--max-grace-period-seconds=86400"}); err != nil {
		t.Fatal(err)
	}
	if cfg.MaxContainersPerPod != 128 || cfg.MaxGracePeriodSeconds != 86400 {
		t.Errorf("after the flags: %d, %d", cfg.MaxContainersPerPod, cfg.MaxGracePeriodSeconds)
	}
	if err := yaml.UnmarshalStrict([]byte("maxContainersPerPod: 0\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(testContext(t)); err == nil || !strings.Contains(err.Error(), "--max-containers-per-pod 0") {
		t.Errorf("Validate of 0 containers: %v", err)
	}
}
