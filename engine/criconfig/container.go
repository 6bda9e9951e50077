package criconfig

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/criconfig/expansion"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
)

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
		if model.IsRestartableInitContainer(c) {
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
		r.CpuShares = int64(milliCPUToShares(cpuLimit.MilliValue()))
	case cpuRequest == nil:
		r.CpuShares = minShares
	default:
		r.CpuShares = int64(milliCPUToShares(cpuRequest.MilliValue()))
	}
	if m := memoryLimit.Value(); m != 0 {
		r.MemoryLimitInBytes = m
	}
	if !opts.DisableCPUQuota {
		period := int64(opts.CPUCFSQuotaPeriod / time.Microsecond)
		r.CpuQuota = milliCPUToQuota(cpuLimit.MilliValue(), period)
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
	// ResolveMount, if set, returns the host path given to the runtime
	// for a mount with a subPath and for every hostPath mount, and
	// whether it must be read-only; the syncer passes its resolver, which
	// opens the path without following a link out of the volume or the
	// allowed prefix and bind-mounts what it opened below the pod
	// directory. Nil joins the volume's path and the subPath after the
	// same lexical checks, without looking at the file system (PlanPod).
	ResolveMount func(MountSource) (ResolvedMount, error)
	// ImageVolumes are the pulled image references (IDs) of the image
	// volumes the container mounts, by volume name; a volume missing from
	// it mounts its reference as written (PlanPod).
	ImageVolumes map[string]string
}

// MountSource is one volume mount of a container that ResolveMount makes
// safe.
type MountSource struct {
	// Container is the container's name and Index the mount's index in
	// its volumeMounts.
	Container string
	Index     int
	// Volume is the pod's volume the mount names.
	Volume *corev1.Volume
	// VolumeDir is the volume's host directory (VolumeDir), or a
	// hostPath's path as the pod gives it.
	VolumeDir string
	// SubPath is the mount's subPath (subPathExpr expanded), lexically
	// checked; empty for none.
	SubPath string
}

// ResolvedMount is what ResolveMount returns.
type ResolvedMount struct {
	// HostPath is given to the runtime.
	HostPath string
	// ReadOnly forces the mount read-only, whatever the pod says.
	ReadOnly bool
}

// ContainerConfig builds a ContainerConfig as the kubelet's
// generateContainerConfig does. It returns an error wrapping ErrNotFound
// for a missing ConfigMap, Secret or key that is not optional, and
// ErrInvalidSpec for a mount of an unknown or unsupported volume or a
// seccomp or AppArmor profile it cannot give the runtime (a Localhost
// seccomp profile outside Options.SeccompProfileRoot).
func ContainerConfig(in ContainerConfigInput, opts Options) (*runtimeapi.ContainerConfig, error) {
	opts = opts.WithDefaults()
	pod, c := in.Pod, in.Container
	env, err := makeEnvironment(in, opts)
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
		Labels:      model.ContainerLabels(pod, c),
		Annotations: model.ContainerAnnotations(pod, c, in.RestartCount),
		Mounts:      mounts,
		LogPath:     containerLogPath(c.Name, in.RestartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
	}
	if sig, ok, err := StopSignal(c); err != nil {
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	} else if ok {
		cfg.StopSignal = sig
	}
	for _, e := range env {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	var cpuReq *resource.Quantity
	if _, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		cpuReq = c.Resources.Requests.Cpu()
	}
	res := linuxResources(cpuReq, c.Resources.Limits.Cpu(), c.Resources.Limits.Memory(), opts)
	res.OomScoreAdj = containerOOMScoreAdjust(pod, c, opts.MemoryCapacity)
	sc, err := containerSecurityContext(pod, c, opts)
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	}
	cfg.Linux = &runtimeapi.LinuxContainerConfig{
		Resources:       res,
		SecurityContext: sc,
	}
	return cfg, nil
}

// StopSignal is the kubelet's getContainerConfigStopSignal: the CRI
// signal of c's lifecycle.stopSignal, and whether it has one. A name CRI
// does not know is an error wrapping ErrInvalidSpec (validation refuses
// it first).
func StopSignal(c *corev1.Container) (runtimeapi.Signal, bool, error) {
	if c.Lifecycle == nil || c.Lifecycle.StopSignal == nil {
		return runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT, false, nil
	}
	name := string(*c.Lifecycle.StopSignal)
	// CRI's names: SIGRTMIN+1 is SIGNAL_SIGRTMINPLUS1, SIGRTMAX-1
	// SIGNAL_SIGRTMAXMINUS1 (the kubelet's signalNameToRuntimeEnum).
	v, ok := runtimeapi.Signal_value["SIGNAL_"+strings.NewReplacer("+", "PLUS", "-", "MINUS").Replace(name)]
	if !ok || v == int32(runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT) || !strings.HasPrefix(name, "SIG") {
		return 0, false, fmt.Errorf("lifecycle.stopSignal %q is not a signal the runtime knows: %w", name, errdefs.ErrInvalidSpec)
	}
	return runtimeapi.Signal(v), true, nil
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
		out[i] = expand(s, vars)
	}
	return out
}

// containerSecurityContext is the kubelet's
// determineEffectiveSecurityContext: the container's security context with
// the pod's filled in, namespaces, supplemental groups, no_new_privs,
// seccomp, AppArmor and masked paths. It returns an error wrapping
// ErrInvalidSpec for a seccomp or AppArmor profile it cannot give the
// runtime.
func containerSecurityContext(pod *corev1.Pod, c *corev1.Container, opts Options) (*runtimeapi.LinuxContainerSecurityContext, error) {
	opts = opts.WithDefaults()
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
	var err error
	if sc.Seccomp, err = seccompProfile(psc, c.SecurityContext, opts); err != nil {
		return nil, err
	}
	// The kubelet sets the deprecated string form too, for runtimes that
	// read only it.
	if sc.Apparmor, sc.ApparmorProfile, err = appArmorProfile(pod, c); err != nil { //nolint:staticcheck // as the kubelet does.
		return nil, err
	}
	sc.NamespaceOptions = namespacesForPod(pod)
	if psc != nil {
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
	}
	sc.NoNewPrivs = eff.AllowPrivilegeEscalation != nil && !*eff.AllowPrivilegeEscalation
	// The kubelet's ConvertToRuntimeMaskedPaths and
	// ConvertToRuntimeReadonlyPaths: Unmasked clears both lists, anything
	// else gives the kubelet's defaults.
	if eff.ProcMount != nil && *eff.ProcMount == corev1.UnmaskedProcMount {
		sc.MaskedPaths, sc.ReadonlyPaths = []string{}, []string{}
	} else {
		sc.MaskedPaths, sc.ReadonlyPaths = slices.Clone(defaultMaskedPaths), slices.Clone(defaultReadonlyPaths)
	}
	return sc, nil
}

// seccompProfile is the kubelet's getSeccompProfile and
// fieldSeccompProfile: the container's profile, else the pod's, else
// RuntimeDefault with SeccompDefault, else Unconfined. A Localhost profile
// is a file below opts.SeccompProfileRoot; one that is missing, absolute or
// leaves that directory is an error wrapping ErrInvalidSpec (validation
// refuses such a pod first; this is the engine's own defence).
func seccompProfile(psc *corev1.PodSecurityContext, csc *corev1.SecurityContext, opts Options) (*runtimeapi.SecurityProfile, error) {
	var p *corev1.SeccompProfile
	switch {
	case csc != nil && csc.SeccompProfile != nil:
		p = csc.SeccompProfile
	case psc != nil && psc.SeccompProfile != nil:
		p = psc.SeccompProfile
	case opts.SeccompDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	default:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case corev1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, fmt.Errorf("localhostProfile must be set if seccompProfile type is Localhost: %w", errdefs.ErrInvalidSpec)
		}
		name := *p.LocalhostProfile
		if filepath.IsAbs(name) || !filepath.IsLocal(name) || strings.IndexByte(name, 0) >= 0 {
			return nil, fmt.Errorf("seccomp localhostProfile %q must be a path below the seccomp profile directory %s: %w", name, opts.SeccompProfileRoot, errdefs.ErrInvalidSpec)
		}
		return &runtimeapi.SecurityProfile{
			ProfileType:  runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(opts.SeccompProfileRoot, name),
		}, nil
	}
	// NOTE(secctx): the kubelet gives any other type Unconfined;
	// validation refuses one, so only a pod that skipped it gets here.
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
}

// appArmorProfile is the kubelet's getAppArmorProfile over
// apparmor.GetProfile: the container's profile, else its legacy
// container.apparmor.security.beta.kubernetes.io/<name> annotation, else
// the pod's profile, else none (nil: the runtime applies its default where
// AppArmor is enabled). It also returns the profile in the deprecated
// string form older runtimes read. An unusable profile is an error
// wrapping ErrInvalidSpec.
func appArmorProfile(pod *corev1.Pod, c *corev1.Container) (*runtimeapi.SecurityProfile, string, error) {
	p := AppArmorProfileOf(pod, c)
	if p == nil {
		return nil, "", nil
	}
	switch p.Type {
	case corev1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, corev1.DeprecatedAppArmorBetaProfileRuntimeDefault, nil
	case corev1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, corev1.DeprecatedAppArmorBetaProfileNameUnconfined, nil
	case corev1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, "", fmt.Errorf("missing localhost apparmor profile name: %w", errdefs.ErrInvalidSpec)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile},
			corev1.DeprecatedAppArmorBetaProfileNamePrefix + *p.LocalhostProfile, nil
	}
	return nil, "", fmt.Errorf("unknown apparmor profile type %q: %w", p.Type, errdefs.ErrInvalidSpec)
}

// AppArmorProfileOf is the kubelet's apparmor.GetProfile: the container's
// profile, else its legacy
// container.apparmor.security.beta.kubernetes.io/<name> annotation, else
// the pod's profile, else nil. The AppArmor admission (engine/admit) and
// the container's config read it alike.
func AppArmorProfileOf(pod *corev1.Pod, c *corev1.Container) *corev1.AppArmorProfile {
	var p *corev1.AppArmorProfile
	if c.SecurityContext != nil {
		p = c.SecurityContext.AppArmorProfile
	}
	if v, ok := pod.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok && p == nil {
		p = appArmorProfileFromAnnotation(v)
	}
	if p == nil && pod.Spec.SecurityContext != nil {
		p = pod.Spec.SecurityContext.AppArmorProfile
	}
	return p
}

// appArmorProfileFromAnnotation is the kubelet's
// getProfileFromPodAnnotations: an unknown value is no profile, and
// "localhost/" alone a Localhost profile without a name.
func appArmorProfileFromAnnotation(v string) *corev1.AppArmorProfile {
	switch {
	case v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
	case v == corev1.DeprecatedAppArmorBetaProfileNameUnconfined:
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	case strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix):
		name := strings.TrimPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
	}
	return nil
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
	for mi, m := range c.VolumeMounts {
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
		case IsFileVolume(v):
			// The kubelet mounts volumes of API data read-only.
			host, mustRO = VolumeDir(pod, VolumePlugin(v), v.Name, opts), true
		case v.PersistentVolumeClaim != nil:
			host, mustRO = ClaimVolumeDir(pod.Namespace, v.PersistentVolumeClaim.ClaimName, opts), v.PersistentVolumeClaim.ReadOnly
		case v.Image != nil:
			// The kubelet's image volume: the runtime mounts the image,
			// read-only, without a host path (KEP-4639).
			if m.SubPath != "" || m.SubPathExpr != "" {
				return nil, fmt.Errorf("container %q: image volume %q: a subPath of an image volume is not supported: %w", c.Name, v.Name, errdefs.ErrInvalidSpec)
			}
			ref := in.ImageVolumes[v.Name]
			if ref == "" {
				ref = v.Image.Reference
			}
			out = append(out, &runtimeapi.Mount{ContainerPath: m.MountPath, Readonly: true, Image: &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: v.Image.Reference},
				Propagation: runtimeapi.MountPropagation_PROPAGATION_PRIVATE})
			continue
		default:
			return nil, fmt.Errorf("volume %q: unsupported volume type: %w", v.Name, errdefs.ErrInvalidSpec)
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			var err error
			if sub, err = expandSubPath(m.SubPathExpr, vars); err != nil {
				return nil, fmt.Errorf("container %q: volume %q: subPathExpr %q: %w", c.Name, v.Name, m.SubPathExpr, err)
			}
		}
		if sub != "" {
			if path.IsAbs(sub) || slices.Contains(strings.Split(sub, "/"), "..") || strings.IndexByte(sub, 0) >= 0 {
				what := fmt.Sprintf("subPath %q", sub)
				if m.SubPathExpr != "" {
					what = fmt.Sprintf("subPathExpr %q expands to %q, which", m.SubPathExpr, sub)
				}
				return nil, fmt.Errorf("container %q: volume %q: %s must be a relative path without '..' or NUL: %w", c.Name, v.Name, what, errdefs.ErrInvalidSpec)
			}
		}
		switch {
		case in.ResolveMount != nil && (sub != "" || v.HostPath != nil):
			r, err := in.ResolveMount(MountSource{Container: c.Name, Index: mi, Volume: v, VolumeDir: host, SubPath: sub})
			if err != nil {
				return nil, fmt.Errorf("container %q: volume %q: %w", c.Name, v.Name, err)
			}
			host, mustRO = r.HostPath, mustRO || r.ReadOnly
		case sub != "":
			host = filepath.Join(host, sub)
		}
		mnt := &runtimeapi.Mount{
			ContainerPath: m.MountPath,
			HostPath:      host,
			Readonly:      m.ReadOnly || mustRO,
			Propagation:   runtimeapi.MountPropagation_PROPAGATION_PRIVATE,
		}
		if m.MountPropagation != nil {
			// The kubelet's translateMountPropagation.
			switch *m.MountPropagation {
			case corev1.MountPropagationNone:
			case corev1.MountPropagationHostToContainer:
				mnt.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case corev1.MountPropagationBidirectional:
				mnt.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
			default:
				return nil, fmt.Errorf("container %q: volume %q: invalid MountPropagation mode: %q: %w", c.Name, v.Name, *m.MountPropagation, errdefs.ErrInvalidSpec)
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

// ErrSubPathExprUnset is wrapped (with errdefs.ErrInvalidSpec) by the
// error of a container whose subPathExpr names a variable its env does not
// set, or sets empty. It depends on values known only at the start (an
// optional key, the pod's IP), so validation cannot foresee it: a
// validated pod may still fail so.
var ErrSubPathExprUnset = errors.New("subPathExpr names a variable without a value")

// expandSubPath is the kubelet's ExpandContainerVolumeMounts: a
// subPathExpr with $(VAR) references to the container's env expanded; a
// reference to a variable that is not set, or set empty, is an error
// naming it (wrapping ErrSubPathExprUnset and ErrInvalidSpec), so that a
// mount never lands on the volume's root by mistake.
func expandSubPath(expr string, vars map[string]string) (string, error) {
	var missing []string
	out := expansion.ExpandFunc(expr, func(name string) (string, bool) {
		v, ok := vars[name]
		if !ok || v == "" {
			missing = append(missing, name)
		}
		return v, true
	})
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", fmt.Errorf("missing value for %s: set it in the container's env: %w: %w",
			strings.Join(slices.Compact(missing), ", "), ErrSubPathExprUnset, errdefs.ErrInvalidSpec)
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
