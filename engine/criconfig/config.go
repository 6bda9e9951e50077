package criconfig

import (
	"fmt"
	"maps"
	"net/netip"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/errdefs"
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
}

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
	if o.CPUCFSQuotaPeriod == 0 {
		o.CPUCFSQuotaPeriod = QuotaPeriod * time.Microsecond
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
)

// PodDir is <root>/pods/<uid>.
func PodDir(pod *corev1.Pod, opts Options) string {
	return filepath.Join(opts.WithDefaults().RootDir, "pods", string(pod.UID))
}

// VolumeDir is <root>/pods/<uid>/volumes/<plugin>/<name>, where emptyDir,
// configMap and secret volumes live; the executor creates and fills it.
func VolumeDir(pod *corev1.Pod, plugin, name string, opts Options) string {
	return filepath.Join(PodDir(pod, opts), "volumes", plugin, name)
}

// PodLogDirectory is the kubelet's BuildPodLogsDirectory:
// <pod-log-dir>/<namespace>_<name>_<uid>.
func PodLogDirectory(pod *corev1.Pod, opts Options) string {
	return filepath.Join(opts.WithDefaults().PodLogDir, strings.Join([]string{pod.Namespace, pod.Name, string(pod.UID)}, "_"))
}

// ContainerLogPath is the kubelet's buildContainerLogsPath, relative to
// the sandbox's log directory: <container>/<restartCount>.log.
func ContainerLogPath(name string, restartCount int32) string {
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
		Labels:       plan.PodLabels(pod),
		Annotations:  plan.PodAnnotations(pod),
		LogDirectory: PodLogDirectory(pod, opts),
	}
	dns, err := PodDNS(pod, opts)
	if err != nil {
		return nil, err
	}
	cfg.DnsConfig = dns
	if !pod.Spec.HostNetwork {
		host, domain, err := PodHostnameAndDomain(pod, opts)
		if err != nil {
			return nil, err
		}
		if pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN && domain != "" {
			host = host + "." + domain
			if len(host) > 64 {
				return nil, fmt.Errorf("fqdn %q is longer than 64 characters: %w", host, errdefs.ErrInvalidSpec)
			}
		}
		cfg.Hostname = host
	}
	for i := range pod.Spec.Containers {
		cfg.PortMappings = append(cfg.PortMappings, portMappings(&pod.Spec.Containers[i])...)
	}
	cfg.Linux = sandboxLinuxConfig(pod, opts)
	return cfg, nil
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

// PodHostnameAndDomain is the kubelet's GeneratePodHostNameAndDomain.
func PodHostnameAndDomain(pod *corev1.Pod, opts Options) (string, string, error) {
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod hostname %q: %s: %w", pod.Spec.Hostname, strings.Join(msgs, ";"), errdefs.ErrInvalidSpec)
		}
		hostname = pod.Spec.Hostname
	}
	// truncatePodHostnameIfNeeded
	const hostnameMaxLen = 63
	if len(hostname) > hostnameMaxLen {
		hostname = strings.TrimRight(hostname[:hostnameMaxLen], "-.")
		if hostname == "" {
			return "", "", fmt.Errorf("hostname for pod %q was invalid: %w", pod.Name, errdefs.ErrInvalidSpec)
		}
	}
	domain := ""
	if pod.Spec.Subdomain != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Subdomain); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod subdomain %q: %s: %w", pod.Spec.Subdomain, strings.Join(msgs, ";"), errdefs.ErrInvalidSpec)
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, opts.ClusterDomain)
	}
	return hostname, domain, nil
}

// The kubelet's DNS limits (validation.MaxDNSNameservers, MaxDNSSearchPaths).
const (
	maxDNSNameservers = 3
	maxDNSSearchPaths = 32
	maxDNSSearchChars = 2048
)

// PodDNS is the kubelet's GetPodDNS: the resolver configuration from the
// pod's dnsPolicy and dnsConfig, the cluster DNS settings and the host's.
func PodDNS(pod *corev1.Pod, opts Options) (*runtimeapi.DNSConfig, error) {
	var base runtimeapi.DNSConfig
	if opts.HostDNS != nil {
		base.Servers = slices.Clone(opts.HostDNS.Servers)
		base.Searches = slices.Clone(opts.HostDNS.Searches)
		base.Options = slices.Clone(opts.HostDNS.Options)
	}
	cfg := &base
	policy := pod.Spec.DNSPolicy
	cluster := false
	switch policy {
	case corev1.DNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case corev1.DNSClusterFirstWithHostNet:
		cluster = true
	case corev1.DNSClusterFirst, "":
		cluster = !pod.Spec.HostNetwork
	case corev1.DNSDefault:
	default:
		return nil, fmt.Errorf("dnsPolicy %q: %w", policy, errdefs.ErrInvalidSpec)
	}
	if cluster && len(opts.ClusterDNS) > 0 {
		cfg.Servers = slices.Clone(opts.ClusterDNS)
		if opts.ClusterDomain != "" {
			cfg.Searches = omitDuplicates(append([]string{
				fmt.Sprintf("%s.svc.%s", pod.Namespace, opts.ClusterDomain),
				"svc." + opts.ClusterDomain,
				opts.ClusterDomain,
			}, cfg.Searches...))
		}
		cfg.Options = []string{"ndots:5"}
	} else if policy != corev1.DNSNone && opts.HostDNS == nil {
		// The kubelet with an empty --resolv-conf (and the fallback of
		// ClusterFirst without cluster DNS).
		for _, ip := range opts.NodeIPs {
			if a, err := netip.ParseAddr(ip); err == nil && a.Is6() {
				cfg.Servers = append(cfg.Servers, "::1")
			} else {
				cfg.Servers = append(cfg.Servers, "127.0.0.1")
			}
		}
		if len(cfg.Servers) == 0 {
			cfg.Servers = []string{"127.0.0.1"}
		}
		cfg.Searches = []string{"."}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeDNSOptions(cfg.Options, dc.Options)
	}
	// formDNSConfigFitsLimits
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		cfg.Searches = cfg.Searches[:maxDNSSearchPaths]
	}
	for len(strings.Join(cfg.Searches, " ")) > maxDNSSearchChars {
		cfg.Searches = cfg.Searches[:len(cfg.Searches)-1]
	}
	return cfg, nil
}

func omitDuplicates(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// mergeDNSOptions is the kubelet's, with the result sorted (the kubelet
// ranges over a map).
func mergeDNSOptions(existing []string, add []corev1.PodDNSConfigOption) []string {
	m := map[string]string{}
	for _, op := range existing {
		if i := strings.Index(op, ":"); i != -1 {
			m[op[:i]] = op[i+1:]
		} else {
			m[op] = ""
		}
	}
	for _, op := range add {
		if op.Value != nil {
			m[op.Name] = *op.Value
		} else {
			m[op.Name] = ""
		}
	}
	out := []string{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != "" {
			out = append(out, k+":"+m[k])
		} else {
			out = append(out, k)
		}
	}
	return out
}

// NamespacesForPod is the kubelet's runtimeutil.NamespacesForPod.
func NamespacesForPod(pod *corev1.Pod) *runtimeapi.NamespaceOption {
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

// normalizeSysctl is the kubelet's utilsysctl.NormalizeName: a name with
// "/" separators becomes dotted.
func normalizeSysctl(name string) string {
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
	lc.SecurityContext.NamespaceOptions = NamespacesForPod(pod)
	if sc := pod.Spec.SecurityContext; sc != nil {
		for _, s := range sc.Sysctls {
			lc.Sysctls[normalizeSysctl(s.Name)] = s.Value
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
	req := aggregate(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests })
	lim := aggregate(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Limits })
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

// aggregate is the kubelet's PodRequests/PodLimits: regular containers
// and sidecars add up; other init containers count as their maximum (with
// the sidecars started before them).
func aggregate(pod *corev1.Pod, get func(*corev1.Container) corev1.ResourceList) corev1.ResourceList {
	sum := corev1.ResourceList{}
	add := func(dst, src corev1.ResourceList) {
		for k, v := range src {
			q := v.DeepCopy()
			if cur, ok := dst[k]; ok {
				q.Add(cur)
			}
			dst[k] = q
		}
	}
	maxOf := func(dst, src corev1.ResourceList) {
		for k, v := range src {
			if cur, ok := dst[k]; !ok || v.Cmp(cur) > 0 {
				dst[k] = v.DeepCopy()
			}
		}
	}
	for i := range pod.Spec.Containers {
		add(sum, get(&pod.Spec.Containers[i]))
	}
	sidecars := corev1.ResourceList{}
	inits := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := get(c)
		if plan.IsRestartableInitContainer(c) {
			add(sum, r)
			add(sidecars, r)
			r = sidecars
		} else {
			tmp := corev1.ResourceList{}
			add(tmp, r)
			add(tmp, sidecars)
			r = tmp
		}
		maxOf(inits, r)
	}
	maxOf(sum, inits)
	return sum
}

// linuxResources is the kubelet's calculateLinuxResources.
func linuxResources(cpuRequest, cpuLimit, memoryLimit *resource.Quantity, opts Options) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	switch {
	case cpuRequest == nil && !cpuLimit.IsZero():
		// An unset request defaults to the limit.
		r.CpuShares = int64(MilliCPUToShares(cpuLimit.MilliValue()))
	case cpuRequest == nil:
		r.CpuShares = MinShares
	default:
		r.CpuShares = int64(MilliCPUToShares(cpuRequest.MilliValue()))
	}
	if m := memoryLimit.Value(); m != 0 {
		r.MemoryLimitInBytes = m
	}
	if !opts.DisableCPUQuota {
		period := int64(opts.CPUCFSQuotaPeriod / time.Microsecond)
		r.CpuQuota = MilliCPUToQuota(cpuLimit.MilliValue(), period)
		r.CpuPeriod = period
	}
	return r
}

// ContainerConfigInput is what ContainerConfig builds from.
type ContainerConfigInput struct {
	// Pod and Container are required; Container is one of Pod's.
	Pod       *corev1.Pod
	Container *corev1.Container
	// RestartCount is the new instance's (PodActions' Attempt).
	RestartCount int32
	// ImageRef is the pulled image's reference; empty means the spec's.
	ImageRef string
	// PodIPs are the sandbox's IPs, for the downward API and /etc/hosts.
	PodIPs []string
	// ConfigMaps and Secrets of the pod's namespace that env refers to.
	ConfigMaps []*corev1.ConfigMap
	Secrets    []*corev1.Secret
	// ResolveSubPath, if set, returns the host path of a mount's subPath
	// (subPathExpr expanded) within the volume's host directory, or an
	// error; the executor passes ResolveSubPath, which refuses symbolic
	// links. Nil joins the two after the same lexical checks, without
	// looking at the file system.
	ResolveSubPath func(volumeDir, subPath string) (string, error)
}

// ContainerConfig builds a ContainerConfig as the kubelet's
// generateContainerConfig does. It returns an error wrapping ErrNotFound
// for a missing ConfigMap, Secret or key that is not optional, and
// ErrInvalidSpec for a mount of an unknown or unsupported volume.
func ContainerConfig(in ContainerConfigInput, opts Options) (*runtimeapi.ContainerConfig, error) {
	opts = opts.WithDefaults()
	pod, c := in.Pod, in.Container
	env, err := MakeEnvironment(in, opts)
	if err != nil {
		return nil, err
	}
	mounts, err := makeMounts(in, env, opts)
	if err != nil {
		return nil, err
	}
	image := in.ImageRef
	if image == "" {
		image = c.Image
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(in.RestartCount)},
		Image:       &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image},
		Command:     expandAll(c.Command, env),
		Args:        expandAll(c.Args, env),
		WorkingDir:  c.WorkingDir,
		Labels:      plan.ContainerLabels(pod, c),
		Annotations: plan.ContainerAnnotations(pod, c, in.RestartCount),
		Mounts:      mounts,
		LogPath:     ContainerLogPath(c.Name, in.RestartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
	}
	for _, e := range env {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	var cpuReq *resource.Quantity
	if _, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		cpuReq = c.Resources.Requests.Cpu()
	}
	res := linuxResources(cpuReq, c.Resources.Limits.Cpu(), c.Resources.Limits.Memory(), opts)
	res.OomScoreAdj = ContainerOOMScoreAdjust(pod, c, opts.MemoryCapacity)
	cfg.Linux = &runtimeapi.LinuxContainerConfig{
		Resources:       res,
		SecurityContext: containerSecurityContext(pod, c, opts),
	}
	return cfg, nil
}

func expandAll(in []string, env []corev1.EnvVar) []string {
	if in == nil {
		return nil
	}
	vars := make(map[string]string, len(env))
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = Expand(s, vars)
	}
	return out
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

// containerSecurityContext is the kubelet's
// determineEffectiveSecurityContext: the container's security context with
// the pod's filled in, namespaces, supplemental groups, no_new_privs,
// seccomp and masked paths.
func containerSecurityContext(pod *corev1.Pod, c *corev1.Container, opts Options) *runtimeapi.LinuxContainerSecurityContext {
	eff := &corev1.SecurityContext{}
	if c.SecurityContext != nil {
		eff = c.SecurityContext.DeepCopy()
	}
	psc := pod.Spec.SecurityContext
	if psc != nil {
		if eff.SELinuxOptions == nil {
			eff.SELinuxOptions = psc.SELinuxOptions
		}
		if eff.RunAsUser == nil {
			eff.RunAsUser = psc.RunAsUser
		}
		if eff.RunAsGroup == nil {
			eff.RunAsGroup = psc.RunAsGroup
		}
		if eff.RunAsNonRoot == nil {
			eff.RunAsNonRoot = psc.RunAsNonRoot
		}
		if eff.SeccompProfile == nil {
			eff.SeccompProfile = psc.SeccompProfile
		}
		if eff.AppArmorProfile == nil {
			eff.AppArmorProfile = psc.AppArmorProfile
		}
	}
	sc := &runtimeapi.LinuxContainerSecurityContext{}
	if caps := eff.Capabilities; caps != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, a := range caps.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
		}
		for _, d := range caps.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
		}
	}
	if o := eff.SELinuxOptions; o != nil {
		sc.SelinuxOptions = &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
	}
	if eff.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *eff.RunAsUser}
	}
	if eff.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *eff.RunAsGroup}
	}
	if eff.Privileged != nil {
		sc.Privileged = *eff.Privileged
	}
	if eff.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *eff.ReadOnlyRootFilesystem
	}
	sc.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	if p := eff.SeccompProfile; p != nil {
		switch p.Type {
		case corev1.SeccompProfileTypeRuntimeDefault:
			sc.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
		case corev1.SeccompProfileTypeLocalhost:
			if p.LocalhostProfile != nil {
				sc.Seccomp = &runtimeapi.SecurityProfile{
					ProfileType:  runtimeapi.SecurityProfile_Localhost,
					LocalhostRef: filepath.Join(opts.RootDir, "seccomp", *p.LocalhostProfile),
				}
			}
		}
	}
	sc.NamespaceOptions = NamespacesForPod(pod)
	if psc != nil {
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
	}
	sc.NoNewPrivs = eff.AllowPrivilegeEscalation != nil && !*eff.AllowPrivilegeEscalation
	if eff.ProcMount != nil && *eff.ProcMount == corev1.UnmaskedProcMount {
		sc.MaskedPaths, sc.ReadonlyPaths = []string{}, []string{}
	} else {
		sc.MaskedPaths, sc.ReadonlyPaths = slices.Clone(defaultMaskedPaths), slices.Clone(defaultReadonlyPaths)
	}
	return sc
}

// makeMounts is the kubelet's makeMounts (kubelet_pods.go) and
// kuberuntime's: the volume mounts in order, /etc/hosts once the pod has
// IPs, and the termination-message file.
func makeMounts(in ContainerConfigInput, env []corev1.EnvVar, opts Options) ([]*runtimeapi.Mount, error) {
	pod, c := in.Pod, in.Container
	var out []*runtimeapi.Mount
	mountHosts := len(in.PodIPs) > 0
	vars := map[string]string{}
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/etc/hosts" {
			mountHosts = false
		}
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			return nil, fmt.Errorf("container %q mounts unknown volume %q: %w", c.Name, m.Name, errdefs.ErrInvalidSpec)
		}
		v := &pod.Spec.Volumes[i]
		var host string
		mustRO := false
		switch {
		case v.EmptyDir != nil:
			host = VolumeDir(pod, VolumePluginEmptyDir, v.Name, opts)
		case v.HostPath != nil:
			host = v.HostPath.Path
		case v.ConfigMap != nil:
			host, mustRO = VolumeDir(pod, VolumePluginConfigMap, v.Name, opts), true
		case v.Secret != nil:
			host, mustRO = VolumeDir(pod, VolumePluginSecret, v.Name, opts), true
		default:
			return nil, fmt.Errorf("volume %q: unsupported volume type: %w", v.Name, errdefs.ErrInvalidSpec)
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = Expand(m.SubPathExpr, vars)
		}
		if sub != "" {
			if path.IsAbs(sub) || slices.Contains(strings.Split(sub, "/"), "..") || strings.IndexByte(sub, 0) >= 0 {
				return nil, fmt.Errorf("volume %q: subPath %q must be a relative path without '..' or NUL: %w", v.Name, sub, errdefs.ErrInvalidSpec)
			}
			if in.ResolveSubPath == nil {
				host = filepath.Join(host, sub)
			} else {
				resolved, err := in.ResolveSubPath(host, sub)
				if err != nil {
					return nil, fmt.Errorf("container %q: volume %q: %w", c.Name, v.Name, err)
				}
				host = resolved
			}
		}
		mnt := &runtimeapi.Mount{
			ContainerPath: m.MountPath,
			HostPath:      host,
			Readonly:      m.ReadOnly || mustRO,
			Propagation:   runtimeapi.MountPropagation_PROPAGATION_PRIVATE,
		}
		if m.MountPropagation != nil {
			switch *m.MountPropagation {
			case corev1.MountPropagationHostToContainer:
				mnt.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case corev1.MountPropagationBidirectional:
				mnt.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
			}
		}
		out = append(out, mnt)
	}
	if mountHosts {
		out = append(out, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: filepath.Join(PodDir(pod, opts), "etc-hosts")})
	}
	if c.TerminationMessagePath != "" {
		out = append(out, &runtimeapi.Mount{
			ContainerPath: c.TerminationMessagePath,
			HostPath:      TerminationMessageFile(pod, c.Name, in.RestartCount, opts),
		})
	}
	return out, nil
}

// TerminationMessageFile is the host file mounted at a container
// instance's terminationMessagePath:
// <root>/pods/<uid>/containers/<name>/<restartCount as %08x>. The kubelet
// names it randomly; podsync derives it so it is known after a restart.
// The executor creates it empty.
func TerminationMessageFile(pod *corev1.Pod, name string, restartCount int32, opts Options) string {
	return filepath.Join(PodDir(pod, opts), "containers", name, fmt.Sprintf("%08x", uint32(restartCount)))
}
