package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/admit"
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

// Defaults of podsyncd's settings.
const (
	DefaultRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	DefaultRootDir         = "/var/lib/podsync"
	DefaultPodLogDir       = "/var/log/pods"
	DefaultClusterDomain   = "cluster.local"
	DefaultCgroupDriver    = "cgroupfs"
	DefaultResolvConf      = "/etc/resolv.conf"
	DefaultMaxPods         = 110
	DefaultShutdownTimeout = 30 * time.Second
)

// Config is podsyncd's whole configuration. Its JSON names are the keys
// of the YAML config file (--config); flags given on the command line
// override the file, which overrides the defaults (DefaultConfig).
type Config struct {
	// ServerConfig holds listen, metricsAddress and security.
	ServerConfig `json:",inline"`

	// RuntimeEndpoint is the CRI runtime socket (--runtime-endpoint).
	RuntimeEndpoint string `json:"runtimeEndpoint,omitempty"`
	// ImageEndpoint is the CRI image service socket (--image-endpoint);
	// empty means RuntimeEndpoint.
	ImageEndpoint string `json:"imageEndpoint,omitempty"`
	// RootDir holds podsync's state: the store and pod volumes (--root-dir).
	RootDir string `json:"rootDir,omitempty"`
	// PodLogDir is where container logs are written (--pod-log-dir).
	PodLogDir string `json:"podLogDir,omitempty"`
	// NodeName is reported in pod statuses (--node-name); empty means the
	// host name.
	NodeName string `json:"nodeName,omitempty"`
	// NodeIPs are the node's addresses (--node-ip); empty means the host's
	// first non-loopback IPv4 address, else 127.0.0.1.
	NodeIPs []string `json:"nodeIPs,omitempty"`
	// NodeLabels are the node's labels (--node-labels k=v,...), which pods'
	// nodeSelector and required node affinity must match; podsyncd adds
	// kubernetes.io/hostname (the node name), kubernetes.io/os and
	// kubernetes.io/arch itself.
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	// NodeTaints are the node's taints (--node-taints key[=value]:Effect),
	// which pods must tolerate when NoSchedule or NoExecute.
	NodeTaints []string `json:"nodeTaints,omitempty"`
	// ClusterDNS are the DNS servers of ClusterFirst pods (--cluster-dns).
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// ClusterDomain is the cluster's DNS domain (--cluster-domain).
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// ResolvConf is the host's resolver configuration given to pods with
	// dnsPolicy Default (--resolv-conf); empty means none.
	ResolvConf string `json:"resolvConf"`
	// CgroupDriver is the runtime's cgroup driver, cgroupfs or systemd
	// (--cgroup-driver).
	CgroupDriver string `json:"cgroupDriver,omitempty"`
	// CgroupRoot is the cgroup the pods' kubepods hierarchy lives under
	// (--cgroup-root), "/" by default.
	CgroupRoot string `json:"cgroupRoot,omitempty"`
	// LogLevel is debug, info, warn or error (--log-level).
	LogLevel string `json:"logLevel,omitempty"`
	// LogFormat is json or console (--log-format).
	LogFormat string `json:"logFormat,omitempty"`
	// Policy is the admission policy for dangerous pod features.
	Policy PolicyConfig `json:"policy"`
	// SystemReserved is subtracted from the machine's cpu and memory to
	// get what pods may request (--system-reserved cpu=500m,memory=512Mi).
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	// MaxPods is the most pods the node admits (--max-pods).
	MaxPods int `json:"maxPods,omitempty"`
	// ShutdownTimeout bounds the graceful shutdown (--shutdown-timeout).
	ShutdownTimeout metav1.Duration `json:"shutdownTimeout,omitzero"`
	// SeccompDefault gives containers that name no seccomp profile the
	// runtime's default one (--seccomp-default, on by default; the
	// kubelet's --seccomp-default). Off, they run Unconfined.
	SeccompDefault bool `json:"seccompDefault"`
	// RemoveOrphans lets podsyncd start on a store with no history (new,
	// emptied or replaced) while the runtime holds podsync's pods, and
	// remove those pods (--remove-orphans). Without it podsyncd refuses
	// to start and leaves them running.
	RemoveOrphans bool `json:"removeOrphans,omitempty"`
	// AdoptRuntime lets podsyncd start on a lost store (new, emptied or
	// replaced) or a corrupt one (moved aside to <file>.corrupt-<UTC
	// time>) by rebuilding a record of every podsync pod the runtime holds
	// from CRI labels and annotations (--adopt-runtime). It wins over
	// RemoveOrphans.
	AdoptRuntime bool `json:"adoptRuntime,omitempty"`
	// MaxRecordBytes caps a pod's record as stored, its spec with the
	// ConfigMaps and Secrets it refers to (--max-record-bytes); 0 means
	// store.DefaultMaxRecordBytes (1.5 MiB).
	MaxRecordBytes int `json:"maxRecordBytes,omitempty"`
	// RevisionLogMaxBytes bounds the bytes of the revision log (config
	// file only); 0 means store.DefaultKeepBytes (64 MiB).
	RevisionLogMaxBytes int64 `json:"revisionLogMaxBytes,omitempty"`
	// HousekeepingInterval is how often the pods' local storage is
	// measured against their emptyDir sizeLimit and ephemeral-storage
	// limits (--housekeeping-interval, the kubelet's name; 10 s).
	HousekeepingInterval metav1.Duration `json:"housekeepingInterval,omitzero"`
	// EvictionStoreMinAvailable is the free space the store's file system
	// keeps: below it the pod using the most local storage there is
	// evicted (--eviction-store-min-available; "5%", a quantity such as
	// "2Gi", or "0" for no check).
	EvictionStoreMinAvailable string `json:"evictionStoreMinAvailable,omitempty"`
}

// StoreThreshold parses EvictionStoreMinAvailable.
func (c Config) StoreThreshold() (engine.StorageThreshold, error) {
	v := strings.TrimSpace(c.EvictionStoreMinAvailable)
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil || f < 0 || f > 100 {
			return engine.StorageThreshold{}, fmt.Errorf("--eviction-store-min-available %q: want a percentage from 0%% to 100%%", v)
		}
		return engine.StorageThreshold{Percent: f, Disabled: f == 0}, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return engine.StorageThreshold{}, fmt.Errorf("--eviction-store-min-available %q: want a percentage (5%%) or a quantity (2Gi)", v)
	}
	return engine.StorageThreshold{Bytes: q.Value(), Disabled: q.IsZero()}, nil
}

// PolicyConfig is the node's admission policy (engine/admit.Policy): a
// Pod Security level and the operator's exemptions, each narrowing one
// check of the level.
type PolicyConfig struct {
	// PodSecurity is the Pod Security level every pod is held to:
	// privileged, baseline (the default) or restricted (--pod-security).
	PodSecurity         string `json:"podSecurity,omitempty"`
	AllowPrivileged     bool   `json:"allowPrivileged,omitempty"`
	AllowHostNamespaces bool   `json:"allowHostNamespaces,omitempty"`
	AllowHostNetwork    bool   `json:"allowHostNetwork,omitempty"`
	AllowHostPID        bool   `json:"allowHostPID,omitempty"`
	AllowHostIPC        bool   `json:"allowHostIPC,omitempty"`
	// AllowedHostPaths are PATH:ro or PATH:rw entries (admit.ParseHostPathPrefix).
	AllowedHostPaths     []string `json:"allowedHostPaths,omitempty"`
	AllowedHostPorts     []string `json:"allowedHostPorts,omitempty"`
	AllowedCapabilities  []string `json:"allowedCapabilities,omitempty"`
	AllowedUnsafeSysctls []string `json:"allowedUnsafeSysctls,omitempty"`
}

// Admit returns the policy as admission takes it, without the denied
// paths (the daemon adds them). Entries Validate refuses are left out.
func (p PolicyConfig) Admit() admit.Policy {
	var prefixes []admit.HostPathPrefix
	for _, s := range p.AllowedHostPaths {
		if pre, err := admit.ParseHostPathPrefix(s); err == nil {
			prefixes = append(prefixes, pre)
		}
	}
	out := admit.Policy{
		AllowPrivileged:      p.AllowPrivileged,
		AllowHostNetwork:     p.AllowHostNetwork || p.AllowHostNamespaces,
		AllowHostPID:         p.AllowHostPID || p.AllowHostNamespaces,
		AllowHostIPC:         p.AllowHostIPC || p.AllowHostNamespaces,
		AllowedHostPaths:     prefixes,
		AllowedCapabilities:  slices.Clone(p.AllowedCapabilities),
		AllowedUnsafeSysctls: slices.Clone(p.AllowedUnsafeSysctls),
	}
	out.Level, _ = admit.ParseLevel(cmp.Or(p.PodSecurity, string(admit.DefaultLevel)))
	for _, r := range p.AllowedHostPorts {
		if pr, err := admit.ParsePortRange(r); err == nil {
			out.AllowedHostPorts = append(out.AllowedHostPorts, pr)
		}
	}
	return out
}

// validate checks the policy's values, naming the flag of each.
func (p PolicyConfig) validate() []error {
	var errs []error
	if p.PodSecurity != "" {
		if _, err := admit.ParseLevel(p.PodSecurity); err != nil {
			errs = append(errs, fmt.Errorf("--pod-security %q: want privileged, baseline or restricted", p.PodSecurity))
		}
	}
	for _, hp := range p.AllowedHostPaths {
		if _, err := admit.ParseHostPathPrefix(hp); err != nil {
			errs = append(errs, fmt.Errorf("--allowed-host-paths %w", err))
		}
	}
	for _, r := range p.AllowedHostPorts {
		if _, err := admit.ParsePortRange(r); err != nil {
			errs = append(errs, fmt.Errorf("--allowed-host-ports: %w", err))
		}
	}
	for _, c := range p.AllowedCapabilities {
		if !admit.ValidCapability(c) {
			errs = append(errs, fmt.Errorf("--allowed-capabilities %q: want a capability name such as NET_ADMIN", c))
		}
	}
	if err := admit.ValidateUnsafeSysctls(p.AllowedUnsafeSysctls); err != nil {
		errs = append(errs, fmt.Errorf("--allowed-unsafe-sysctls: %w", err))
	}
	return errs
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		ServerConfig:    DefaultServerConfig(),
		RuntimeEndpoint: DefaultRuntimeEndpoint,
		RootDir:         DefaultRootDir,
		PodLogDir:       DefaultPodLogDir,
		ClusterDomain:   DefaultClusterDomain,
		ResolvConf:      DefaultResolvConf,
		CgroupDriver:    DefaultCgroupDriver,
		LogLevel:        "info",
		LogFormat:       "json",
		MaxPods:         DefaultMaxPods,
		ShutdownTimeout: metav1.Duration{Duration: DefaultShutdownTimeout},
		SeccompDefault:  true,

		HousekeepingInterval:      metav1.Duration{Duration: engine.DefaultHousekeepingInterval},
		EvictionStoreMinAvailable: strconv.Itoa(engine.DefaultStoreMinAvailablePercent) + "%",
	}
}

// AddFlags binds every flag of c to fs, with c's values as defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	c.ServerConfig.AddFlags(fs)
	fs.StringVar(&c.RuntimeEndpoint, "runtime-endpoint", c.RuntimeEndpoint, "CRI runtime endpoint")
	fs.StringVar(&c.ImageEndpoint, "image-endpoint", c.ImageEndpoint, "CRI image service endpoint (default: --runtime-endpoint)")
	fs.StringVar(&c.RootDir, "root-dir", c.RootDir, "directory of podsync's state (store, pod volumes)")
	fs.StringVar(&c.PodLogDir, "pod-log-dir", c.PodLogDir, "directory of container logs")
	fs.StringVar(&c.NodeName, "node-name", c.NodeName, "node name reported in pod statuses (default: the host name)")
	fs.StringArrayVar(&c.NodeIPs, "node-ip", c.NodeIPs,
		"node IP address; repeatable (default: the first non-loopback IPv4 address, else 127.0.0.1)")
	fs.StringToStringVar(&c.NodeLabels, "node-labels", c.NodeLabels,
		"node labels pods' nodeSelector and required node affinity must match, e.g. disk=ssd,zone=a")
	fs.StringSliceVar(&c.NodeTaints, "node-taints", c.NodeTaints,
		"node taints pods must tolerate, key[=value]:Effect; comma-separated or repeatable")
	fs.StringArrayVar(&c.ClusterDNS, "cluster-dns", c.ClusterDNS, "DNS server IP of ClusterFirst pods; repeatable")
	fs.StringVar(&c.ClusterDomain, "cluster-domain", c.ClusterDomain, "cluster DNS domain")
	fs.StringVar(&c.ResolvConf, "resolv-conf", c.ResolvConf,
		`host resolver configuration for pods with dnsPolicy Default; "" for none`)
	fs.StringVar(&c.CgroupDriver, "cgroup-driver", c.CgroupDriver, "cgroup driver of the runtime: cgroupfs or systemd")
	fs.StringVar(&c.CgroupRoot, "cgroup-root", c.CgroupRoot, `cgroup under which the pods' "kubepods" cgroups are made`)
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "log format: json or console")
	fs.StringVar(&c.Policy.PodSecurity, "pod-security", c.Policy.PodSecurity,
		"Pod Security level every pod is held to: privileged, baseline or restricted (default baseline)")
	fs.BoolVar(&c.Policy.AllowPrivileged, "allow-privileged", c.Policy.AllowPrivileged,
		"exempt privileged containers from the Pod Security level")
	fs.BoolVar(&c.Policy.AllowHostNamespaces, "allow-host-namespaces", c.Policy.AllowHostNamespaces,
		"exempt pods in the host's network, PID and IPC namespaces from the Pod Security level")
	fs.BoolVar(&c.Policy.AllowHostNetwork, "allow-host-network", c.Policy.AllowHostNetwork,
		"exempt pods in the host network namespace from the Pod Security level")
	fs.BoolVar(&c.Policy.AllowHostPID, "allow-host-pid", c.Policy.AllowHostPID, "exempt pods in the host PID namespace from the Pod Security level")
	fs.BoolVar(&c.Policy.AllowHostIPC, "allow-host-ipc", c.Policy.AllowHostIPC, "exempt pods in the host IPC namespace from the Pod Security level")
	fs.StringArrayVar(&c.Policy.AllowedHostPaths, "allowed-host-paths", c.Policy.AllowedHostPaths,
		"path prefix hostPath volumes may use, as PATH:ro (mounted read-only whatever the pod says) or PATH:rw; "+
			"repeatable (none: hostPath refused below privileged). podsync's and the runtime's own paths stay refused")
	fs.StringArrayVar(&c.Policy.AllowedHostPorts, "allowed-host-ports", c.Policy.AllowedHostPorts,
		"host port or range (8000-8099) containers may use; repeatable (none: hostPort refused below privileged)")
	fs.StringArrayVar(&c.Policy.AllowedCapabilities, "allowed-capabilities", c.Policy.AllowedCapabilities,
		"capability containers may add beyond the Pod Security level's; repeatable")
	fs.StringArrayVar(&c.Policy.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", c.Policy.AllowedUnsafeSysctls,
		"unsafe sysctl or prefix (kernel.msg*) pods may set, beyond the safe ones; repeatable")
	fs.StringToStringVar(&c.SystemReserved, "system-reserved", c.SystemReserved,
		"resources reserved for the system, subtracted from the machine's (e.g. cpu=500m,memory=512Mi)")
	fs.IntVar(&c.MaxPods, "max-pods", c.MaxPods, "most pods the node admits")
	fs.DurationVar(&c.ShutdownTimeout.Duration, "shutdown-timeout", c.ShutdownTimeout.Duration,
		"time calls in flight get to finish on SIGTERM")
	fs.BoolVar(&c.SeccompDefault, "seccomp-default", c.SeccompDefault,
		"give containers that name no seccomp profile the runtime's default (RuntimeDefault) rather than none (Unconfined)")
	fs.BoolVar(&c.RemoveOrphans, "remove-orphans", c.RemoveOrphans,
		"remove podsync's pods the store does not hold: start on a new, empty or corrupt store (moved aside) although "+
			"the runtime holds podsync's pods, and remove those pods and any orphan (without it podsyncd refuses to start "+
			"on a lost store and keeps orphans running)")
	fs.BoolVar(&c.AdoptRuntime, "adopt-runtime", c.AdoptRuntime,
		"start on a new, empty or corrupt store (moved aside to <file>.corrupt-<time>) by rebuilding the records of the "+
			"podsync pods the runtime holds from their CRI labels and annotations; ConfigMaps and Secrets are not recovered")
	fs.IntVar(&c.MaxRecordBytes, "max-record-bytes", c.MaxRecordBytes,
		"largest pod record the store accepts, the pod with the ConfigMaps and Secrets it refers to (0: 1.5 MiB)")
	fs.DurationVar(&c.HousekeepingInterval.Duration, "housekeeping-interval", c.HousekeepingInterval.Duration,
		"how often pods' local storage is measured against their emptyDir sizeLimit and ephemeral-storage limits")
	fs.StringVar(&c.EvictionStoreMinAvailable, "eviction-store-min-available", c.EvictionStoreMinAvailable,
		`free space the store's file system keeps: below it the pod using the most there is evicted (e.g. 5%, 2Gi; 0: no check)`)
}

// Validate checks c; it does not touch the file system. Call Complete
// first so that the node name and IPs are set.
func (c Config) Validate(ctx context.Context) error {
	var errs []error
	if err := c.ServerConfig.Validate(ctx); err != nil {
		errs = append(errs, err)
	}
	type setting struct{ flag, value string }
	if c.RuntimeEndpoint == "" {
		errs = append(errs, errors.New("--runtime-endpoint: required"))
	}
	for _, ep := range []setting{{"--runtime-endpoint", c.RuntimeEndpoint}, {"--image-endpoint", c.ImageEndpoint}} {
		if ep.value != "" && !strings.HasPrefix(ep.value, "unix:///") && !strings.HasPrefix(ep.value, "tcp://") {
			errs = append(errs, fmt.Errorf("%s %q: want unix:///path or tcp://host:port", ep.flag, ep.value))
		}
	}
	for _, dir := range []setting{{"--root-dir", c.RootDir}, {"--pod-log-dir", c.PodLogDir}} {
		if !filepath.IsAbs(dir.value) {
			errs = append(errs, fmt.Errorf("%s %q: want an absolute path", dir.flag, dir.value))
		}
	}
	if c.ResolvConf != "" && !filepath.IsAbs(c.ResolvConf) {
		errs = append(errs, fmt.Errorf("--resolv-conf %q: want an absolute path", c.ResolvConf))
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.NodeName) {
		errs = append(errs, fmt.Errorf("--node-name %q: %s", c.NodeName, msg))
	}
	if err := admit.CheckNodeLabels(c.NodeLabels); err != nil {
		errs = append(errs, fmt.Errorf("--node-labels: %w", err))
	}
	if _, err := c.Taints(); err != nil {
		errs = append(errs, err)
	}
	if len(c.NodeIPs) == 0 {
		errs = append(errs, errors.New("--node-ip: at least one address is required"))
	}
	for _, ip := range c.NodeIPs {
		if _, err := netip.ParseAddr(ip); err != nil {
			errs = append(errs, fmt.Errorf("--node-ip %q: not an IP address", ip))
		}
	}
	for _, ip := range c.ClusterDNS {
		if _, err := netip.ParseAddr(ip); err != nil {
			errs = append(errs, fmt.Errorf("--cluster-dns %q: not an IP address", ip))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.ClusterDomain) {
		errs = append(errs, fmt.Errorf("--cluster-domain %q: %s", c.ClusterDomain, msg))
	}
	if c.CgroupDriver != "cgroupfs" && c.CgroupDriver != "systemd" {
		errs = append(errs, fmt.Errorf("--cgroup-driver %q: want cgroupfs or systemd", c.CgroupDriver))
	}
	if c.CgroupRoot != "" && (!strings.HasPrefix(c.CgroupRoot, "/") || slices.Contains(strings.Split(c.CgroupRoot, "/"), "..")) {
		errs = append(errs, fmt.Errorf("--cgroup-root %q: want an absolute cgroup path without \"..\" elements", c.CgroupRoot))
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel))
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		errs = append(errs, fmt.Errorf("--log-format %q: want json or console", c.LogFormat))
	}
	errs = append(errs, c.Policy.validate()...)
	if _, err := c.Reserved(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxPods <= 0 {
		errs = append(errs, fmt.Errorf("--max-pods %d: must be positive", c.MaxPods))
	}
	if c.MaxRecordBytes < 0 {
		errs = append(errs, fmt.Errorf("--max-record-bytes %d: must not be negative", c.MaxRecordBytes))
	}
	if c.RevisionLogMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("revisionLogMaxBytes %d: must not be negative", c.RevisionLogMaxBytes))
	}
	if c.ShutdownTimeout.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout %s: must be positive", c.ShutdownTimeout.Duration))
	}
	if c.HousekeepingInterval.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--housekeeping-interval %s: must be positive", c.HousekeepingInterval.Duration))
	}
	if _, err := c.StoreThreshold(); err != nil {
		errs = append(errs, err)
	}
	if c.MetricsAddress != "" {
		host, _, err := net.SplitHostPort(c.MetricsAddress)
		switch ip, perr := netip.ParseAddr(host); {
		case err != nil:
			errs = append(errs, fmt.Errorf("--metrics-address %q: want host:port", c.MetricsAddress))
		case c.MetricsAllowRemote:
		case host == "" || (perr == nil && !ip.Unmap().IsLoopback()):
			errs = append(errs, fmt.Errorf("--metrics-address %q: not a loopback address; metrics and pprof are "+
				"unauthenticated HTTP: use 127.0.0.1:PORT, or add --metrics-allow-remote", c.MetricsAddress))
		}
	}
	if c.EnableProfiling && c.MetricsAddress == "" {
		errs = append(errs, errors.New("--enable-profiling: needs --metrics-address"))
	}
	return errors.Join(errs...)
}

// Taints parses NodeTaints.
func (c Config) Taints() ([]corev1.Taint, error) {
	var out []corev1.Taint
	for _, spec := range c.NodeTaints {
		t, err := admit.ParseTaint(spec)
		if err != nil {
			return nil, fmt.Errorf("--node-taints: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Reserved parses SystemReserved; only cpu and memory may be reserved.
func (c Config) Reserved() (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, name := range slices.Sorted(maps.Keys(c.SystemReserved)) {
		if name != string(corev1.ResourceCPU) && name != string(corev1.ResourceMemory) {
			return nil, fmt.Errorf("--system-reserved %s: only cpu and memory may be reserved", name)
		}
		q, err := resource.ParseQuantity(c.SystemReserved[name])
		if err != nil {
			return nil, fmt.Errorf("--system-reserved %s=%s: %w", name, c.SystemReserved[name], err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("--system-reserved %s=%s: must not be negative", name, c.SystemReserved[name])
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// Complete fills the settings whose defaults come from the host: the
// image endpoint, the node name (the host name) and the node IPs.
func (c *Config) Complete() error {
	if c.ImageEndpoint == "" {
		c.ImageEndpoint = c.RuntimeEndpoint
	}
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-name: not set and the host name is unknown: %w", err)
		}
		c.NodeName = strings.ToLower(h)
	}
	if len(c.NodeIPs) == 0 {
		c.NodeIPs = []string{hostIPv4()}
	}
	return nil
}

// hostIPv4 returns the host's first non-loopback, non-link-local IPv4
// address, else 127.0.0.1.
func hostIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if ip := ipn.IP.To4(); ip != nil && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				return ip.String()
			}
		}
	}
	return "127.0.0.1"
}

// LoadConfig builds the configuration from args: the defaults, then the
// file of --config (strict: unknown keys are errors), then the flags
// given. It returns an error wrapping pflag.ErrHelp for --help.
func LoadConfig(ctx context.Context, args []string) (Config, error) {
	c := DefaultConfig()
	var path string
	fs := newFlagSet(&c, &path)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q: podsyncd takes flags only", fs.Args())
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("--config: %w", err)
		}
		c = DefaultConfig()
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			return Config{}, fmt.Errorf("--config %s: %w", path, err)
		}
		// The flags given override the file.
		if err := newFlagSet(&c, &path).Parse(args); err != nil {
			return Config{}, err
		}
	}
	if err := c.Complete(); err != nil {
		return Config{}, err
	}
	if err := c.Validate(ctx); err != nil {
		return Config{}, err
	}
	return c, nil
}

func newFlagSet(c *Config, path *string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("podsyncd", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = true
	fs.StringVar(path, "config", *path, "YAML config file; flags given on the command line override it")
	c.AddFlags(fs)
	return fs
}

// Usage returns the flags' help text.
func Usage() string {
	c := DefaultConfig()
	var path string
	return "Usage: podsyncd [flags]\n\nFlags:\n" + newFlagSet(&c, &path).FlagUsages()
}
