package daemon

import (
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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/manifestdir"
	"github.com/podsync/podsync/server"
)

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
	// MaxContainersPerPod bounds a pod's init and regular containers
	// together (--max-containers-per-pod): podsync's limit, not
	// Kubernetes'.
	MaxContainersPerPod int `json:"maxContainersPerPod,omitempty"`
	// MaxGracePeriodSeconds bounds terminationGracePeriodSeconds
	// (--max-grace-period-seconds): podsync's limit; Kubernetes has none.
	MaxGracePeriodSeconds int64 `json:"maxGracePeriodSeconds,omitempty"`
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
	// StreamIdleTimeout ends exec, attach and port-forward sessions
	// without traffic for that long (--stream-idle-timeout, the kubelet's
	// --streaming-connection-idle-timeout; 4 h).
	StreamIdleTimeout metav1.Duration `json:"streamIdleTimeout,omitzero"`
	// RequireLease refuses a mutating call that does not carry the
	// current epoch of the node's held lease (--require-lease): one
	// control plane at a time drives the node. Without it leases are
	// advisory: only a superseded epoch is refused.
	RequireLease bool `json:"requireLease,omitempty"`
	// EvictionStoreMinAvailable is the free space the store's file system
	// keeps: below it the pod using the most local storage there is
	// evicted (--eviction-store-min-available; "5%", a quantity such as
	// "2Gi", or "0" for no check).
	EvictionStoreMinAvailable string `json:"evictionStoreMinAvailable,omitempty"`
	// ManifestDir is a directory of pod, ConfigMap and Secret manifests
	// podsyncd keeps applied, the kubelet's staticPodPath
	// (--manifest-dir); empty means none.
	ManifestDir string `json:"manifestDir,omitempty"`
	// ManifestRescan is the period of the manifest directory's full
	// rescan besides inotify (--manifest-rescan; 20 s, the kubelet's
	// fileCheckFrequency).
	ManifestRescan metav1.Duration `json:"manifestRescan,omitzero"`
	// PriorityClasses are the priority classes pods may name beyond the
	// built-in system-node-critical and system-cluster-critical
	// (--priority-classes NAME=VALUE,...).
	PriorityClasses map[string]string `json:"priorityClasses,omitempty"`
	// ExtendedResources are the node's extended resources and their
	// capacity (--extended-resources example.com/foo=4,...), which pods'
	// requests of them are admitted against.
	ExtendedResources map[string]string `json:"extendedResources,omitempty"`
	// ImageCredentials is a docker config.json whose credentials every
	// image pull may use, after those of the pod's imagePullSecrets
	// (--image-credentials); read when podsyncd starts.
	ImageCredentials string `json:"imageCredentials,omitempty"`
	// ImagePullCredentialsVerificationPolicy is whether a pod may run an
	// image the node holds without proving it can pull it, the kubelet's
	// imagePullCredentialsVerificationPolicy
	// (--image-pull-credentials-verification-policy): NeverVerify,
	// NeverVerifyPreloadedImages (the default), NeverVerifyAllowlistedImages
	// or AlwaysVerify.
	ImagePullCredentialsVerificationPolicy string `json:"imagePullCredentialsVerificationPolicy,omitempty"`
	// PreloadedImagesVerificationAllowlist are the images
	// NeverVerifyAllowlistedImages never verifies, the kubelet's
	// preloadedImagesVerificationAllowlist
	// (--preloaded-images-verification-allowlist).
	PreloadedImagesVerificationAllowlist []string `json:"preloadedImagesVerificationAllowlist,omitempty"`
}

// ImagePullVerification is the node's verification of pods' access to
// the images it holds.
func (c Config) ImagePullVerification() syncer.ImagePullVerification {
	return syncer.ImagePullVerification{Policy: c.ImagePullCredentialsVerificationPolicy, Allowlist: c.PreloadedImagesVerificationAllowlist}
}

// Priorities parses PriorityClasses.
func (c Config) Priorities() (map[string]int32, error) {
	p, err := admit.ParsePriorityClasses(c.PriorityClasses)
	if err != nil {
		return nil, fmt.Errorf("--priority-classes: %w", err)
	}
	return p, nil
}

// Extended parses ExtendedResources: each name an extended resource
// (domain/name, not kubernetes.io), each capacity a whole number.
func (c Config) Extended() (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, name := range slices.Sorted(maps.Keys(c.ExtendedResources)) {
		v := c.ExtendedResources[name]
		if !admit.IsExtendedResource(corev1.ResourceName(name)) || len(validation.IsQualifiedName(name)) > 0 {
			return nil, fmt.Errorf("--extended-resources %s: want an extended resource name, domain/name outside kubernetes.io (example.com/foo)", name)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 || q.MilliValue()%1000 != 0 {
			return nil, fmt.Errorf("--extended-resources %s=%s: want a whole number of units", name, v)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
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
		// The kubelet's default since v1.35 (KubeletEnsureSecretPulledImages).
		ImagePullCredentialsVerificationPolicy: syncer.NeverVerifyPreloadedImages,
		LogLevel:                               "info",
		LogFormat:                              "json",
		MaxPods:                                DefaultMaxPods,

		MaxContainersPerPod:   server.DefaultMaxContainersPerPod,
		MaxGracePeriodSeconds: server.DefaultMaxGracePeriodSeconds,

		ShutdownTimeout: metav1.Duration{Duration: DefaultShutdownTimeout},
		SeccompDefault:  true,

		HousekeepingInterval:      metav1.Duration{Duration: engine.DefaultHousekeepingInterval},
		ManifestRescan:            metav1.Duration{Duration: manifestdir.DefaultRescan},
		StreamIdleTimeout:         metav1.Duration{Duration: engine.DefaultStreamIdleTimeout},
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
	fs.IntVar(&c.MaxContainersPerPod, "max-containers-per-pod", c.MaxContainersPerPod,
		"most init and regular containers together one pod may have (podsync's limit; Kubernetes has none)")
	fs.Int64Var(&c.MaxGracePeriodSeconds, "max-grace-period-seconds", c.MaxGracePeriodSeconds,
		"longest terminationGracePeriodSeconds a pod or probe may ask for (podsync's limit; Kubernetes has none)")
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
	fs.StringVar(&c.ManifestDir, "manifest-dir", c.ManifestDir,
		"directory of Pod, ConfigMap and Secret manifests (*.yaml, *.yml, *.json; dot-files ignored) kept applied as files "+
			"come, change and go, as the kubelet's staticPodPath; the API cannot change or delete what they hold")
	fs.DurationVar(&c.ManifestRescan.Duration, "manifest-rescan", c.ManifestRescan.Duration,
		"period of the manifest directory's full rescan, besides inotify")
	fs.DurationVar(&c.StreamIdleTimeout.Duration, "stream-idle-timeout", c.StreamIdleTimeout.Duration,
		"how long an exec, attach or port-forward session may go without traffic before it is ended")
	fs.BoolVar(&c.RequireLease, "require-lease", c.RequireLease,
		"refuse SyncPod, RunPods, DeletePod, AddEphemeralContainer, ApplyObjects, DeleteObject, CreateVolume and DeleteVolume "+
			"unless they carry the current epoch of the node's lease (AcquireLease): one control plane at a time drives the node")
	fs.StringVar(&c.EvictionStoreMinAvailable, "eviction-store-min-available", c.EvictionStoreMinAvailable,
		`free space the store's file system keeps: below it the pod using the most there is evicted (e.g. 5%, 2Gi; 0: no check)`)
	fs.StringToStringVar(&c.PriorityClasses, "priority-classes", c.PriorityClasses,
		"priority classes pods may name beyond system-node-critical and system-cluster-critical, NAME=VALUE (e.g. high=1000,batch=-10)")
	fs.StringToStringVar(&c.ExtendedResources, "extended-resources", c.ExtendedResources,
		"extended resources of the node and their capacity, which pods' requests are admitted against (e.g. example.com/foo=4)")
	fs.StringVar(&c.ImageCredentials, "image-credentials", c.ImageCredentials,
		"docker config.json whose credentials every image pull may use, after those of the pod's imagePullSecrets")
	fs.StringVar(&c.ImagePullCredentialsVerificationPolicy, "image-pull-credentials-verification-policy", c.ImagePullCredentialsVerificationPolicy,
		"whether a pod may run an image the node holds without pulling it with its own credentials: NeverVerify, "+
			"NeverVerifyPreloadedImages (images the node pulled are verified), NeverVerifyAllowlistedImages or AlwaysVerify")
	fs.StringSliceVar(&c.PreloadedImagesVerificationAllowlist, "preloaded-images-verification-allowlist", c.PreloadedImagesVerificationAllowlist,
		"images NeverVerifyAllowlistedImages never verifies: repositories without tag (registry.example/app) or prefixes (registry.example/team/*)")
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
	if c.MaxContainersPerPod <= 0 {
		errs = append(errs, fmt.Errorf("--max-containers-per-pod %d: must be positive", c.MaxContainersPerPod))
	}
	if c.MaxGracePeriodSeconds <= 0 {
		errs = append(errs, fmt.Errorf("--max-grace-period-seconds %d: must be positive", c.MaxGracePeriodSeconds))
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
	if c.ManifestDir != "" && !filepath.IsAbs(c.ManifestDir) {
		errs = append(errs, fmt.Errorf("--manifest-dir %q: want an absolute path", c.ManifestDir))
	}
	if c.ManifestRescan.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--manifest-rescan %s: must be positive", c.ManifestRescan.Duration))
	}
	if c.StreamIdleTimeout.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--stream-idle-timeout %s: must be positive", c.StreamIdleTimeout.Duration))
	}
	if _, err := c.StoreThreshold(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Priorities(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Extended(); err != nil {
		errs = append(errs, err)
	}
	if c.ImageCredentials != "" && !filepath.IsAbs(c.ImageCredentials) {
		errs = append(errs, fmt.Errorf("--image-credentials %q: want an absolute path", c.ImageCredentials))
	}
	if err := c.ImagePullVerification().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--image-pull-credentials-verification-policy: %w", err))
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
