package criconfig

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
)

// Defaults of Options.
const (
	DefaultRootDir   = "/var/lib/podsync"
	DefaultPodLogDir = "/var/log/pods"
	DefaultCgroupFS  = "/sys/fs/cgroup"
)

// Options are the node settings the CRI configs depend on, the podsync
// counterparts of kubelet flags. The zero value is usable.
type Options struct {
	// RootDir holds pod directories (the kubelet's --root-dir); default
	// DefaultRootDir.
	RootDir string
	// PodLogDir holds pod log directories (--pod-logs-dir); default
	// DefaultPodLogDir.
	PodLogDir string
	// ClusterDNS are the cluster DNS servers (--cluster-dns);
	// ClusterDomain the cluster domain (--cluster-domain).
	ClusterDNS    []string
	ClusterDomain string
	// HostDNS is the node's resolver configuration, parsed from the
	// kubelet's --resolv-conf by the daemon; nil means an empty
	// --resolv-conf (localhost, search ".").
	HostDNS *runtimeapi.DNSConfig
	// CgroupDriver is "cgroupfs" (default) or "systemd"; CgroupRoot the
	// root cgroup (--cgroup-root), default "/".
	CgroupDriver string
	CgroupRoot   string
	// CgroupFS is where the cgroup hierarchies are mounted, default
	// /sys/fs/cgroup. With the cgroupfs driver RemovePod removes the
	// pod's cgroup there (runc removes only the containers' cgroups).
	CgroupFS string
	// NodeName is spec.nodeName for pods that have none.
	NodeName string
	// NodeIPs are the node's IPs (status.hostIP(s) of the downward API).
	NodeIPs []string
	// NodeAllocatable stands in for unset limits in resourceFieldRef env.
	NodeAllocatable corev1.ResourceList
	// MemoryCapacity is the node's memory, for OOM score adjustment.
	MemoryCapacity int64
	// DisableCPUQuota turns off CFS quota (--cpu-cfs-quota=false).
	DisableCPUQuota bool
	// CPUCFSQuotaPeriod is the CFS period; default 100ms.
	CPUCFSQuotaPeriod time.Duration
	// SeccompDefault gives containers whose pod and container name no
	// seccomp profile the runtime's default one (RuntimeDefault) instead of
	// none (Unconfined), as the kubelet's --seccomp-default does.
	SeccompDefault bool
	// SeccompProfileRoot is the directory a Localhost seccomp profile
	// (seccompProfile.localhostProfile) is a path below, as the kubelet's
	// --seccomp-profile-root; default <RootDir>/seccomp. A profile path
	// that leaves it is refused.
	SeccompProfileRoot string
}

// WithDefaults returns o with the defaults of its zero fields filled in.
func (o Options) WithDefaults() Options {
	if o.RootDir == "" {
		o.RootDir = DefaultRootDir
	}
	if o.PodLogDir == "" {
		o.PodLogDir = DefaultPodLogDir
	}
	if o.CgroupDriver == "" {
		o.CgroupDriver = CgroupfsDriver
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = "/"
	}
	if o.CgroupFS == "" {
		o.CgroupFS = DefaultCgroupFS
	}
	if o.SeccompProfileRoot == "" {
		o.SeccompProfileRoot = filepath.Join(o.RootDir, "seccomp")
	}
	if o.CPUCFSQuotaPeriod == 0 {
		o.CPUCFSQuotaPeriod = quotaPeriod * time.Microsecond
	}
	return o
}

// Volume directory names under <root>/pods/<uid>/volumes. podsync's root
// is its own (/var/lib/podsync), not the kubelet's, so it uses plain names
// rather than the kubelet's "kubernetes.io~empty-dir" plugin names: nothing
// but podsync reads these directories.
const (
	VolumePluginEmptyDir  = "empty-dir"
	VolumePluginConfigMap = "configmap"
	VolumePluginSecret    = "secret"
	// VolumePluginDownwardAPI and VolumePluginProjected hold downwardAPI
	// and projected volumes.
	VolumePluginDownwardAPI = "downward-api"
	VolumePluginProjected   = "projected"
)

// VolumePlugin is the directory name under volumes/ of a pod volume of
// files (IsFileVolume) or an emptyDir; "" for another kind.
func VolumePlugin(v *corev1.Volume) string {
	switch {
	case v.EmptyDir != nil:
		return VolumePluginEmptyDir
	case v.ConfigMap != nil:
		return VolumePluginConfigMap
	case v.Secret != nil:
		return VolumePluginSecret
	case v.DownwardAPI != nil:
		return VolumePluginDownwardAPI
	case v.Projected != nil:
		return VolumePluginProjected
	}
	return ""
}

// PodDir is <root>/pods/<uid>.
func PodDir(pod *corev1.Pod, opts Options) string {
	return filepath.Join(opts.WithDefaults().RootDir, "pods", string(pod.UID))
}

// VolumeDir is <root>/pods/<uid>/volumes/<plugin>/<name>, where emptyDir,
// configMap and secret volumes live; the executor creates and fills it.
func VolumeDir(pod *corev1.Pod, plugin, name string, opts Options) string {
	return filepath.Join(PodDir(pod, opts), "volumes", plugin, name)
}

// ClaimVolumeDir is <root>/claims/<namespace>/<claim>, the node-local
// named volume a persistentVolumeClaim volume of that claimName mounts in
// a pod of that namespace: created on first use, shared by the pods of
// the namespace naming the claim (a claim is a namespace's, as a PVC is),
// kept when they are deleted.
func ClaimVolumeDir(namespace, claim string, opts Options) string {
	return filepath.Join(ClaimVolumesRoot(opts), namespace, claim)
}

// ClaimVolumesRoot is <root>/claims, which holds the named volumes, one
// directory per namespace.
func ClaimVolumesRoot(opts Options) string {
	return filepath.Join(opts.WithDefaults().RootDir, "claims")
}

// LegacyClaimVolumesRoot is <root>/volumes, where podsync kept named
// volumes before they were a namespace's (<root>/volumes/<claim>); the
// node moves them to ClaimVolumesRoot when it starts.
func LegacyClaimVolumesRoot(opts Options) string {
	return filepath.Join(opts.WithDefaults().RootDir, "volumes")
}

// PodLogDirectory is the kubelet's BuildPodLogsDirectory:
// <pod-log-dir>/<namespace>_<name>_<uid>.
func PodLogDirectory(pod *corev1.Pod, opts Options) string {
	return filepath.Join(opts.WithDefaults().PodLogDir, strings.Join([]string{pod.Namespace, pod.Name, string(pod.UID)}, "_"))
}

// containerLogPath is the kubelet's buildContainerLogsPath, relative to
// the sandbox's log directory: <container>/<restartCount>.log.
func containerLogPath(name string, restartCount int32) string {
	return filepath.Join(name, strconv.Itoa(int(restartCount))+".log")
}

// SandboxConfig builds the pod's PodSandboxConfig as the kubelet's
// generatePodSandboxConfig does. It returns an error wrapping
// ErrInvalidSpec for an invalid hostname, subdomain or DNS policy.
func SandboxConfig(pod *corev1.Pod, attempt uint32, opts Options) (*runtimeapi.PodSandboxConfig, error) {
	opts = opts.WithDefaults()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		Labels:       model.PodLabels(pod),
		Annotations:  model.PodAnnotations(pod),
		LogDirectory: PodLogDirectory(pod, opts),
	}
	dns, err := podDNS(pod, opts)
	if err != nil {
		return nil, err
	}
	cfg.DnsConfig = dns
	if !pod.Spec.HostNetwork {
		host, domain, err := PodHostnameAndDomain(pod, opts)
		if err != nil {
			return nil, err
		}
		if host, err = nodenameForKernel(host, domain, pod.Spec.SetHostnameAsFQDN); err != nil {
			return nil, err
		}
		cfg.Hostname = host
	}
	for i := range pod.Spec.Containers {
		cfg.PortMappings = append(cfg.PortMappings, portMappings(&pod.Spec.Containers[i])...)
	}
	cfg.Linux = sandboxLinuxConfig(pod, opts)
	return cfg, nil
}

// fqdnMaxLen is the kubelet's: an FQDN fits the kernel's 64-character
// nodename.
const fqdnMaxLen = 64

// nodenameForKernel is the kubelet's GetNodenameForKernel: with
// setHostnameAsFQDN and a domain, the hostname is the FQDN, which must fit
// in 64 characters (an error wrapping ErrInvalidSpec otherwise).
func nodenameForKernel(hostname, domain string, setHostnameAsFQDN *bool) (string, error) {
	if domain == "" || setHostnameAsFQDN == nil || !*setHostnameAsFQDN {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > fqdnMaxLen {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested): %w",
			fqdn, fqdnMaxLen, len(fqdn), errdefs.ErrInvalidSpec)
	}
	return fqdn, nil
}

// portMappings is the kubelet's MakePortMappings: every port, a repeated
// name (or unnamed family/protocol/hostIP/ports tuple) skipped.
func portMappings(c *corev1.Container) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	names := map[string]bool{}
	for _, p := range c.Ports {
		family := "any"
		if p.HostIP != "" {
			family = "v4"
			if a, err := netip.ParseAddr(p.HostIP); err == nil && a.Is6() && !a.Is4In6() {
				family = "v6"
			}
		}
		name := p.Name
		if name == "" {
			name = fmt.Sprintf("%s-%s-%s:%d:%d", family, p.Protocol, p.HostIP, p.ContainerPort, p.HostPort)
		}
		if names[name] {
			continue
		}
		names[name] = true
		out = append(out, &runtimeapi.PortMapping{
			Protocol:      toRuntimeProtocol(p.Protocol),
			ContainerPort: p.ContainerPort,
			HostPort:      p.HostPort,
			HostIp:        p.HostIP,
		})
	}
	return out
}

func toRuntimeProtocol(p corev1.Protocol) runtimeapi.Protocol {
	switch p {
	case corev1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case corev1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// The kubelet's DNS limits (validation.MaxDNSNameservers, MaxDNSSearchPaths).
const (
	maxDNSNameservers = 3
	maxDNSSearchPaths = 32
	maxDNSSearchChars = 2048
)

// namespacesForPod is the kubelet's runtimeutil.NamespacesForPod.
func namespacesForPod(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: plan.NetworkModeForPod(pod),
		Ipc:     runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		UsernsOptions: &runtimeapi.UserNamespace{
			Mode: runtimeapi.NamespaceMode_NODE,
		},
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

func hasPrivilegedContainer(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return true
			}
		}
	}
	return false
}

// NormalizeSysctl is the kubelet's utilsysctl.NormalizeName: a name with
// "/" separators becomes dotted. The sandbox config and the sysctl
// admission (engine/admit) both name sysctls this way.
func NormalizeSysctl(name string) string {
	i := strings.IndexAny(name, "./")
	if i == -1 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
}

// sandboxLinuxConfig is the kubelet's generatePodSandboxLinuxConfig plus
// applySandboxResources.
func sandboxLinuxConfig(pod *corev1.Pod, opts Options) *runtimeapi.LinuxPodSandboxConfig {
	lc := &runtimeapi.LinuxPodSandboxConfig{
		CgroupParent: PodCgroupParent(pod, opts),
		SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			Privileged: hasPrivilegedContainer(pod),
			Seccomp:    &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
		},
		Sysctls: map[string]string{},
	}
	// NOTE(engine): the kubelet sets namespace options only inside its
	// "pod has a security context" branch and relies on the API server
	// defaulting one; podsync sets them always, so a pod that skipped
	// defaulting cannot start a sandbox whose namespaces disagree with its
	// containers' (containerd 2.x refuses that).
	lc.SecurityContext.NamespaceOptions = namespacesForPod(pod)
	if sc := pod.Spec.SecurityContext; sc != nil {
		for _, s := range sc.Sysctls {
			lc.Sysctls[NormalizeSysctl(s.Name)] = s.Value
		}
		if sc.RunAsUser != nil {
			lc.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
		}
		if sc.RunAsGroup != nil {
			lc.SecurityContext.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
		}
		if sc.FSGroup != nil {
			lc.SecurityContext.SupplementalGroups = append(lc.SecurityContext.SupplementalGroups, *sc.FSGroup)
		}
		lc.SecurityContext.SupplementalGroups = append(lc.SecurityContext.SupplementalGroups, sc.SupplementalGroups...)
		if o := sc.SELinuxOptions; o != nil {
			lc.SecurityContext.SelinuxOptions = &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
		}
	}
	// The kubelet's calculateSandboxResources: pod-level resources, when
	// set, replace the containers' (PodLevelResources).
	resOpts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
	req := resourcehelper.PodRequests(pod, resOpts)
	lim := resourcehelper.PodLimits(pod, resOpts)
	var cpuReq *resource.Quantity
	if q, ok := req[corev1.ResourceCPU]; ok {
		cpuReq = &q
	}
	lc.Resources = linuxResources(cpuReq, lim.Cpu(), lim.Memory(), opts)
	lc.Overhead = &runtimeapi.LinuxContainerResources{}
	if oh := pod.Spec.Overhead; oh != nil {
		lc.Overhead = linuxResources(oh.Cpu(), oh.Cpu(), oh.Memory(), opts)
	}
	return lc
}

// The kubelet's default masked and read-only paths
// (pkg/securitycontext/util.go).
var (
	defaultMaskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)
