package validation

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"
)

// ValidatePod validates a pod as podsync runs it: its metadata
// (ValidatePodMetadata) and its spec (ValidatePodSpec). The pod must be
// defaulted as the API server defaults pods (convert.Default), as
// Kubernetes validates after defaulting; it is not changed.
//
// Every violation is returned, with a path below fldPath in the API's JSON
// names: "spec.containers[1].image" with a nil fldPath, or
// "pods[0].spec.containers[1].image" with fldPath "pods[0]". An empty list
// means the pod is valid.
func ValidatePod(pod *corev1.Pod, fldPath *field.Path, opts Options) field.ErrorList {
	errs := ValidatePodMetadata(pod, fldPath)
	return append(errs, ValidatePodSpec(&pod.Spec, &pod.ObjectMeta, fldPath.Child("spec"), opts)...)
}

// ValidatePodMetadata validates a defaulted pod's apiVersion and kind
// (empty, or v1 and Pod), its name (a DNS-1123 subdomain), namespace (a
// DNS-1123 label), labels, annotations and UID (ValidateUID), that the
// name of its log directory, <namespace>_<name>_<uid>, is one file name,
// its backoff limit (AnnotationBackoffLimit), the Pod Security level it
// asks for (AnnotationPodSecurity), and its legacy seccomp and
// AppArmor annotations: each must name a valid
// profile and a container of the pod and agree with the field that
// convert.Default made of it, or the pod set (the API server's checks,
// plus a refusal of what it would accept and ignore).
// Paths are below fldPath, as in ValidatePod.
func ValidatePodMetadata(pod *corev1.Pod, fldPath *field.Path) field.ErrorList {
	errs := validateTypeMeta(fldPath, pod.TypeMeta, "Pod")
	if pod.Name == "" && pod.GenerateName != "" {
		// The name is yet to be generated (RunPods does, as the API
		// server does on create): its prefix is checked, and the uid
		// comes with the name.
		meta := pod.ObjectMeta
		meta.Name = "generated"
		errs = append(errs, ValidateGenerateName(fldPath.Child("metadata", "generateName"), pod.GenerateName)...)
		errs = append(errs, validateObjectMeta(fldPath.Child("metadata"), &meta)...)
		if pod.UID != "" {
			errs = append(errs, ValidateUID(string(pod.UID), fldPath.Child("metadata", "uid"))...)
		}
		errs = append(errs, legacyProfileAnnotations(pod, fldPath)...)
		return append(errs, backoffLimitAnnotation(pod, fldPath)...)
	}
	errs = append(errs, validateObjectMeta(fldPath.Child("metadata"), &pod.ObjectMeta)...)
	if pod.UID != "" || pod.Name != "" {
		// A pod without a name has no uid derived: the name is what is
		// missing.
		errs = append(errs, ValidateUID(string(pod.UID), fldPath.Child("metadata", "uid"))...)
	}
	errs = append(errs, legacyProfileAnnotations(pod, fldPath)...)
	errs = append(errs, backoffLimitAnnotation(pod, fldPath)...)
	errs = append(errs, podSecurityAnnotation(pod, fldPath)...)
	// The pod's log directory is named <namespace>_<name>_<uid>, one file
	// name (the kubelet's layout).
	validNamespace := len(validation.IsDNS1123Label(pod.Namespace)) == 0
	if maxName := MaxFileNameBytes - len(pod.Namespace) - len(pod.UID) - 2; validNamespace && len(pod.UID) == 36 && len(pod.Name) > maxName {
		errs = append(errs, field.Invalid(fldPath.Child("metadata", "name"), pod.Name, fmt.Sprintf(
			"must be at most %d bytes long in namespace %q: the log directory name <namespace>_<name>_<uid> may not exceed %d bytes",
			maxName, pod.Namespace, MaxFileNameBytes)))
	}
	return errs
}

// ValidatePodSpec validates the spec of a defaulted pod whose metadata is
// meta, at fldPath (the spec itself: "pods[0].spec"): the restart, DNS and
// pull policies podsync knows, grace periods within opts.Limits, the node
// name against opts.NodeName, host aliases, security contexts, volumes,
// containers (unique names, images, ports, env, resources, mounts, probes
// and hooks), and that every ConfigMap and Secret it refers to without
// optional is in opts.Objects, with the keys it names. References are not
// checked when meta's namespace is not a valid one: ValidatePodMetadata
// reports that.
func ValidatePodSpec(spec *corev1.PodSpec, meta *metav1.ObjectMeta, fldPath *field.Path, opts Options) field.ErrorList {
	pv := &podValidator{
		lim:      opts.Limits.withDefaults(),
		nodeName: opts.NodeName,
		objs:     opts.Objects,
		skipRefs: len(validation.IsDNS1123Label(meta.Namespace)) > 0 || opts.StoredObjects,
	}
	pv.spec(fldPath, meta.Namespace, spec)
	return pv.errs
}

// podValidator validates the spec of one pod and collects violations.
type podValidator struct {
	lim      Limits
	nodeName string
	objs     *Objects
	errs     field.ErrorList
	// skipRefs turns off the checks that referenced ConfigMaps and
	// Secrets are among objs, for a pod whose namespace is invalid or
	// that may refer to the node's stored objects.
	skipRefs bool
	// containerNames are the names of the pod's init and regular
	// containers, which a resourceFieldRef may name.
	containerNames map[string]bool
	// imageVolumes are the names of the pod's image volumes.
	imageVolumes map[string]bool
}

func (pv *podValidator) add(errs ...*field.Error) {
	pv.errs = append(pv.errs, errs...)
}

var (
	restartPolicies        = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	dnsPolicies            = []corev1.DNSPolicy{corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone}
	pullPolicies           = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	protocols              = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	terminationMsgPolicies = []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}
	storageMedia           = []corev1.StorageMedium{corev1.StorageMediumDefault, corev1.StorageMediumMemory}
	uriSchemes             = []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}
	grpcProbeModes         = []corev1.GRPCProbeMode{corev1.GRPCProbeModePlaintext, corev1.GRPCProbeModeTLS}
	mountPropagations      = []corev1.MountPropagationMode{
		corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone,
	}
	// stopSignals are the API server's supportedStopSignalsLinux.
	stopSignals = []corev1.Signal{
		corev1.SIGABRT, corev1.SIGALRM, corev1.SIGBUS, corev1.SIGCHLD,
		corev1.SIGCLD, corev1.SIGCONT, corev1.SIGFPE, corev1.SIGHUP,
		corev1.SIGILL, corev1.SIGINT, corev1.SIGIO, corev1.SIGIOT,
		corev1.SIGKILL, corev1.SIGPIPE, corev1.SIGPOLL, corev1.SIGPROF,
		corev1.SIGPWR, corev1.SIGQUIT, corev1.SIGSEGV, corev1.SIGSTKFLT,
		corev1.SIGSTOP, corev1.SIGSYS, corev1.SIGTERM, corev1.SIGTRAP,
		corev1.SIGTSTP, corev1.SIGTTIN, corev1.SIGTTOU, corev1.SIGURG,
		corev1.SIGUSR1, corev1.SIGUSR2, corev1.SIGVTALRM, corev1.SIGWINCH,
		corev1.SIGXCPU, corev1.SIGXFSZ, corev1.SIGRTMIN, corev1.SIGRTMINPLUS1,
		corev1.SIGRTMINPLUS2, corev1.SIGRTMINPLUS3, corev1.SIGRTMINPLUS4,
		corev1.SIGRTMINPLUS5, corev1.SIGRTMINPLUS6, corev1.SIGRTMINPLUS7,
		corev1.SIGRTMINPLUS8, corev1.SIGRTMINPLUS9, corev1.SIGRTMINPLUS10,
		corev1.SIGRTMINPLUS11, corev1.SIGRTMINPLUS12, corev1.SIGRTMINPLUS13,
		corev1.SIGRTMINPLUS14, corev1.SIGRTMINPLUS15, corev1.SIGRTMAXMINUS14,
		corev1.SIGRTMAXMINUS13, corev1.SIGRTMAXMINUS12, corev1.SIGRTMAXMINUS11,
		corev1.SIGRTMAXMINUS10, corev1.SIGRTMAXMINUS9, corev1.SIGRTMAXMINUS8,
		corev1.SIGRTMAXMINUS7, corev1.SIGRTMAXMINUS6, corev1.SIGRTMAXMINUS5,
		corev1.SIGRTMAXMINUS4, corev1.SIGRTMAXMINUS3, corev1.SIGRTMAXMINUS2,
		corev1.SIGRTMAXMINUS1, corev1.SIGRTMAX,
	}
	hostPathTypes = []corev1.HostPathType{
		corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory, corev1.HostPathFileOrCreate,
		corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev,
	}
	// envFieldPaths are the downward API fields an env var may select,
	// besides metadata.labels['key'] and metadata.annotations['key'].
	envFieldPaths = []string{
		"metadata.name", "metadata.namespace", "metadata.uid",
		"spec.nodeName", "spec.serviceAccountName", "status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs",
	}
)

// Kubernetes' bounds on DNS configuration (k8s.io/kubernetes
// pkg/apis/core/validation).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

func (pv *podValidator) spec(p *field.Path, namespace string, spec *corev1.PodSpec) {
	if !slices.Contains(restartPolicies, spec.RestartPolicy) {
		pv.add(field.NotSupported(p.Child("restartPolicy"), spec.RestartPolicy, restartPolicies))
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil {
		pv.add(gracePeriod(p.Child("terminationGracePeriodSeconds"), *g, 0, pv.lim.MaxGracePeriodSeconds)...)
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		pv.add(field.Invalid(p.Child("activeDeadlineSeconds"), *d, "must be greater than 0"))
	}
	if spec.Hostname != "" {
		pv.add(DNS1123Label(p.Child("hostname"), spec.Hostname)...)
	}
	if spec.Subdomain != "" {
		pv.add(DNS1123Label(p.Child("subdomain"), spec.Subdomain)...)
	}
	pv.add(hostnameOverride(p, spec)...)
	pv.scheduling(p, spec)
	if n := spec.NodeName; n != "" {
		if pv.nodeName != "" && n != pv.nodeName {
			pv.add(field.Invalid(p.Child("nodeName"), n, fmt.Sprintf("must be empty or this node's name %q", pv.nodeName)))
		} else {
			pv.add(DNS1123Subdomain(p.Child("nodeName"), n)...)
		}
	}
	pv.dns(p, spec)
	for i, h := range spec.HostAliases {
		hp := p.Child("hostAliases").Index(i)
		pv.add(validation.IsValidIP(hp.Child("ip"), h.IP)...)
		for j, name := range h.Hostnames {
			pv.add(DNS1123Subdomain(hp.Child("hostnames").Index(j), name)...)
		}
	}
	pv.podSecurityContext(p.Child("securityContext"), spec.SecurityContext)
	pv.containerNames = map[string]bool{}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		pv.containerNames[c.Name] = true
	}
	pv.podFields(p, spec)
	volumes := pv.volumes(p.Child("volumes"), namespace, spec.Volumes)

	if len(spec.Containers) == 0 {
		pv.add(field.Required(p.Child("containers"), "at least one container is required"))
	}
	if n := len(spec.Containers) + len(spec.InitContainers); n > pv.lim.MaxContainersPerPod {
		tooMany := field.TooMany(p.Child("containers"), n, pv.lim.MaxContainersPerPod)
		tooMany.Detail += ", init and regular containers together: this node's limit, not Kubernetes' (podsyncd --max-containers-per-pod raises it)"
		pv.add(tooMany)
	}
	pc := &podContainers{
		namespace:     namespace,
		hostNetwork:   spec.HostNetwork,
		restartPolicy: spec.RestartPolicy,
		gracePeriod:   spec.TerminationGracePeriodSeconds,
		os:            spec.OS,
		volumes:       volumes,
		names:         make(map[string]bool),
		portNames:     make(map[string]bool),
	}
	for i := range spec.InitContainers {
		pv.container(p.Child("initContainers").Index(i), &spec.InitContainers[i], true, pc)
	}
	for i := range spec.Containers {
		pv.container(p.Child("containers").Index(i), &spec.Containers[i], false, pc)
	}
	pv.ephemeralContainers(p.Child("ephemeralContainers"), spec, pc)
}

// maxHostnameOverrideLen is the API server's bound on hostnameOverride.
const maxHostnameOverrideLen = 64

// hostnameOverride is the API server's validatePodHostName: the override
// is a DNS-1123 subdomain of at most 64 characters, and a pod that sets
// its hostname as its FQDN or runs in the node's network namespace (whose
// hostname is the node's) may not have one.
func hostnameOverride(p *field.Path, spec *corev1.PodSpec) field.ErrorList {
	o := spec.HostnameOverride
	if o == nil {
		return nil
	}
	hp := p.Child("hostnameOverride")
	var errs field.ErrorList
	if spec.SetHostnameAsFQDN != nil && *spec.SetHostnameAsFQDN {
		errs = append(errs, field.Forbidden(hp, "may not be specified when setHostnameAsFQDN is true"))
	}
	if spec.HostNetwork {
		errs = append(errs, field.Forbidden(hp, "may not be specified when hostNetwork is true"))
	}
	if len(*o) > maxHostnameOverrideLen {
		errs = append(errs, field.TooLong(hp, "", maxHostnameOverrideLen))
	}
	return append(errs, DNS1123Subdomain(hp, *o)...)
}

// ephemeralContainers is the API server's validateEphemeralContainers:
// names unique across every container of the pod, a target that is an
// init or regular container, and none of the fields a debug container
// may not have (ports, probes, lifecycle, resources, resizePolicy,
// restartPolicy, a volume mount's subPath), each checked otherwise as a
// container's.
func (pv *podValidator) ephemeralContainers(p *field.Path, spec *corev1.PodSpec, pc *podContainers) {
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i]
		ip := p.Index(i)
		c := (*corev1.Container)(&ec.EphemeralContainerCommon)
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"ports", len(c.Ports) > 0},
			{"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil},
			{"startupProbe", c.StartupProbe != nil},
			{"lifecycle", c.Lifecycle != nil},
			{"resources", len(c.Resources.Limits) > 0 || len(c.Resources.Requests) > 0 || len(c.Resources.Claims) > 0},
			{"resizePolicy", len(c.ResizePolicy) > 0},
			{"restartPolicy", c.RestartPolicy != nil},
			{"restartPolicyRules", len(c.RestartPolicyRules) > 0},
		} {
			if f.set {
				pv.add(field.Forbidden(ip.Child(f.name), "cannot be set for an Ephemeral Container"))
			}
		}
		for j, m := range c.VolumeMounts {
			if m.SubPath != "" {
				pv.add(field.Forbidden(ip.Child("volumeMounts").Index(j).Child("subPath"), "cannot be set for an Ephemeral Container"))
			}
		}
		if t := ec.TargetContainerName; t != "" && !pv.containerNames[t] {
			pv.add(field.NotFound(ip.Child("targetContainerName"), t))
		}
		// The common checks, on a copy without the forbidden fields so
		// that each is reported once.
		cc := *c
		cc.Ports, cc.LivenessProbe, cc.ReadinessProbe, cc.StartupProbe, cc.Lifecycle = nil, nil, nil, nil, nil
		cc.Resources, cc.ResizePolicy, cc.RestartPolicy, cc.RestartPolicyRules = corev1.ResourceRequirements{}, nil, nil, nil
		pv.container(ip, &cc, false, pc)
	}
}

func (pv *podValidator) dns(p *field.Path, spec *corev1.PodSpec) {
	if !slices.Contains(dnsPolicies, spec.DNSPolicy) {
		pv.add(field.NotSupported(p.Child("dnsPolicy"), spec.DNSPolicy, dnsPolicies))
	}
	cfg := spec.DNSConfig
	if spec.DNSPolicy == corev1.DNSNone {
		switch {
		case cfg == nil:
			pv.add(field.Required(p.Child("dnsConfig"), "must provide dnsConfig when dnsPolicy is None"))
		case len(cfg.Nameservers) == 0:
			pv.add(field.Required(p.Child("dnsConfig", "nameservers"), "must provide at least one DNS nameserver when dnsPolicy is None"))
		}
	}
	if cfg == nil {
		return
	}
	cp := p.Child("dnsConfig")
	if n := len(cfg.Nameservers); n > maxDNSNameservers {
		pv.add(field.TooMany(cp.Child("nameservers"), n, maxDNSNameservers))
	}
	for i, ns := range cfg.Nameservers {
		pv.add(validation.IsValidIP(cp.Child("nameservers").Index(i), ns)...)
	}
	if n := len(cfg.Searches); n > maxDNSSearchPaths {
		pv.add(field.TooMany(cp.Child("searches"), n, maxDNSSearchPaths))
	}
	if n := len(strings.Join(cfg.Searches, " ")); n > maxDNSSearchListChars {
		pv.add(field.TooLong(cp.Child("searches"), nil, maxDNSSearchListChars))
	}
	for i, s := range cfg.Searches {
		// A trailing dot (a fully qualified name) and "." itself are
		// allowed, as in Kubernetes.
		if s == "." {
			continue
		}
		pv.add(DNS1123Subdomain(cp.Child("searches").Index(i), strings.TrimSuffix(s, "."))...)
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			pv.add(field.Required(cp.Child("options").Index(i).Child("name"), ""))
		}
	}
}

var sysctlRE = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

const maxSysctlNameLen = 253

func (pv *podValidator) podSecurityContext(p *field.Path, sc *corev1.PodSecurityContext) {
	if sc == nil {
		return
	}
	pv.add(userID(p.Child("runAsUser"), sc.RunAsUser)...)
	pv.add(groupID(p.Child("runAsGroup"), sc.RunAsGroup)...)
	pv.add(groupID(p.Child("fsGroup"), sc.FSGroup)...)
	if pol := sc.FSGroupChangePolicy; pol != nil && *pol != corev1.FSGroupChangeAlways && *pol != corev1.FSGroupChangeOnRootMismatch {
		pv.add(field.NotSupported(p.Child("fsGroupChangePolicy"), *pol, []string{string(corev1.FSGroupChangeAlways), string(corev1.FSGroupChangeOnRootMismatch)}))
	}
	pv.add(seccompProfile(p.Child("seccompProfile"), sc.SeccompProfile)...)
	pv.add(appArmorProfile(p.Child("appArmorProfile"), sc.AppArmorProfile)...)
	for i, g := range sc.SupplementalGroups {
		pv.add(groupID(p.Child("supplementalGroups").Index(i), &g)...)
	}
	seen := make(map[string]bool, len(sc.Sysctls))
	for i, s := range sc.Sysctls {
		sp := p.Child("sysctls").Index(i)
		switch {
		case s.Name == "":
			pv.add(field.Required(sp.Child("name"), ""))
		case len(s.Name) > maxSysctlNameLen:
			pv.add(field.TooLong(sp.Child("name"), s.Name, maxSysctlNameLen))
		case !sysctlRE.MatchString(s.Name):
			pv.add(field.Invalid(sp.Child("name"), s.Name, "must be a sysctl name of lower-case segments separated by '.' or '/', such as net.ipv4.ip_forward"))
		case seen[s.Name]:
			pv.add(field.Duplicate(sp.Child("name"), s.Name))
		}
		seen[s.Name] = true
		if s.Value == "" {
			pv.add(field.Required(sp.Child("value"), ""))
		}
	}
}

// podFields checks the pod-level fields of the kubelet's namespaces,
// scheduling and resources as the API server does, refusing a value
// podsync cannot honour with what to do instead.
func (pv *podValidator) podFields(p *field.Path, spec *corev1.PodSpec) {
	pv.add(podOS(p, spec)...)
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace && spec.HostPID {
		pv.add(field.Invalid(p.Child("shareProcessNamespace"), true, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	if spec.HostUsers != nil && !*spec.HostUsers {
		for _, ns := range []struct {
			name string
			set  bool
		}{{"hostNetwork", spec.HostNetwork}, {"hostPID", spec.HostPID}, {"hostIPC", spec.HostIPC}} {
			if ns.set {
				pv.add(field.Forbidden(p.Child(ns.name), "when `hostUsers` is false: a pod in a user namespace of its own cannot share the node's namespaces"))
			}
		}
	}
	if n := spec.RuntimeClassName; n != nil {
		// The API server's ValidateRuntimeClassName.
		pv.add(DNS1123Subdomain(p.Child("runtimeClassName"), *n)...)
	}
	if spec.Overhead != nil {
		// The API server's validateOverhead: the containers' rules for
		// limits, under spec.overhead.limits.
		pv.resources(p.Child("overhead"), &corev1.ResourceRequirements{Limits: spec.Overhead})
	}
	if n := spec.PriorityClassName; n != "" {
		pv.add(DNS1123Subdomain(p.Child("priorityClassName"), n)...)
	}
	if n := spec.ServiceAccountName; n != "" {
		// The API server's ValidateServiceAccountName: a subdomain.
		pv.add(DNS1123Subdomain(p.Child("serviceAccountName"), n)...)
	}
	for i, ref := range spec.ImagePullSecrets {
		if ref.Name == "" {
			pv.add(field.Required(p.Child("imagePullSecrets").Index(i).Child("name"), "the name of a Secret sent with the pod"))
		}
	}
	if spec.Resources != nil {
		pv.podResources(p.Child("resources"), spec)
	}
}

// podResources is the API server's validation of pod-level resources
// (PodLevelResources): cpu, memory and hugepages only, requests at most
// the limits, and at least what the containers ask for.
func (pv *podValidator) podResources(p *field.Path, spec *corev1.PodSpec) {
	r := spec.Resources
	for _, part := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, name := range slices.Sorted(maps.Keys(part.rl)) {
			np := p.Child(part.name).Key(string(name))
			q := part.rl[name]
			switch {
			case !resourcehelper.IsSupportedPodLevelResource(name):
				pv.add(field.NotSupported(np, name, []string{"cpu", "memory", "hugepages-<size>"}))
			case q.Sign() < 0:
				pv.add(field.Invalid(np, q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		if limit, ok := r.Limits[name]; ok && req.Cmp(limit) > 0 {
			pv.add(field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	// validatePodResourceConsistency: the pod's requests cover the
	// containers' aggregate requests, its limits each container's limit.
	pod := &corev1.Pod{Spec: *spec}
	agg := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		want, req := agg[name], r.Requests[name]
		if req.Cmp(want) < 0 {
			pv.add(field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be greater than or equal to aggregate container requests of %s", want.String())))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Limits)) {
		limit := r.Limits[name]
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			if cl, ok := c.Resources.Limits[name]; ok && cl.Cmp(limit) > 0 {
				pv.add(field.Invalid(p.Child("limits").Key(string(name)), limit.String(),
					fmt.Sprintf("must be greater than or equal to container %q limit of %s", c.Name, cl.String())))
				break
			}
		}
	}
}
