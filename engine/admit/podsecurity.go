package admit

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/podsync/podsync/validation"
)

// ReasonPodSecurity is the reason of a pod the node's Pod Security level
// refuses.
const ReasonPodSecurity = "PodSecurity"

// DefaultLevel is the Pod Security level of a node whose policy names none.
const DefaultLevel = psapi.LevelBaseline

// ParseLevel parses a Pod Security level: privileged, baseline or
// restricted.
func ParseLevel(s string) (psapi.Level, error) {
	l, err := psapi.ParseLevel(s)
	if err != nil {
		return "", fmt.Errorf("pod security level %q: want privileged, baseline or restricted", s)
	}
	return l, nil
}

// PortRange is a range of host ports, both ends included.
type PortRange struct {
	From, To int32
}

// ParsePortRange parses "N" or "N-M" (1 ≤ N ≤ M ≤ 65535).
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	var r PortRange
	if _, err := fmt.Sscanf(lo, "%d", &r.From); err != nil || fmt.Sprint(r.From) != lo {
		return PortRange{}, fmt.Errorf("host port range %q: want a port or a range such as 8000-8099", s)
	}
	if _, err := fmt.Sscanf(hi, "%d", &r.To); err != nil || fmt.Sprint(r.To) != hi {
		return PortRange{}, fmt.Errorf("host port range %q: want a port or a range such as 8000-8099", s)
	}
	if r.From < 1 || r.To > 65535 || r.From > r.To {
		return PortRange{}, fmt.Errorf("host port range %q: want ports from 1 to 65535, the first not above the second", s)
	}
	return r, nil
}

func (r PortRange) String() string {
	if r.From == r.To {
		return fmt.Sprint(r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// Contains reports whether port is in the range.
func (r PortRange) Contains(port int32) bool { return port >= r.From && port <= r.To }

// checkFields names, for each Pod Security check, the fields it reads and
// the exemption the operator has for it, if any: an admission rejection
// says what to change or which flag opens it.
var checkFields = map[policy.CheckID]struct{ field, exemption string }{
	"allowPrivilegeEscalation":   {"securityContext.allowPrivilegeEscalation", ""},
	"appArmorProfile":            {"securityContext.appArmorProfile", ""},
	"capabilities_baseline":      {"securityContext.capabilities.add", "--allowed-capabilities"},
	"capabilities_restricted":    {"securityContext.capabilities", "--allowed-capabilities"},
	"hostNamespaces":             {"spec.hostNetwork, spec.hostPID, spec.hostIPC", "--allow-host-namespaces"},
	"hostPathVolumes":            {"spec.volumes[].hostPath", "--allowed-host-paths"},
	"hostPorts":                  {"ports[].hostPort", "--allowed-host-ports"},
	"hostProbesAndHostLifecycle": {"probes' and lifecycle handlers' host", ""},
	"privileged":                 {"securityContext.privileged", "--allow-privileged"},
	"procMount":                  {"securityContext.procMount", ""},
	"procMount_restricted":       {"securityContext.procMount", ""},
	"restrictedVolumes":          {"spec.volumes[]", "--allowed-host-paths (for hostPath)"},
	"runAsNonRoot":               {"securityContext.runAsNonRoot", ""},
	"runAsUser":                  {"securityContext.runAsUser", ""},
	"seLinuxOptions":             {"securityContext.seLinuxOptions", ""},
	"seccompProfile_baseline":    {"securityContext.seccompProfile", ""},
	"seccompProfile_restricted":  {"securityContext.seccompProfile", ""},
	"sysctls":                    {"spec.securityContext.sysctls", "--allowed-unsafe-sysctls"},
	"windowsHostProcess":         {"securityContext.windowsOptions.hostProcess", ""},
}

// levelCheck is one Pod Security check at the latest policy version.
type levelCheck struct {
	id    policy.CheckID
	check policy.CheckPodFn
}

var (
	levelChecksOnce sync.Once
	levelChecks     map[psapi.Level][]levelCheck
)

// checksFor returns the checks of a level at the latest policy version,
// in the library's order, the way its evaluator selects them (a
// restricted check replaces the baseline checks it overrides), but each
// with its ID so that a rejection can name it.
func checksFor(level psapi.Level) []levelCheck {
	levelChecksOnce.Do(func() {
		levelChecks = map[psapi.Level][]levelCheck{}
		overridden := map[policy.CheckID]bool{}
		var baseline, restricted []levelCheck
		for _, c := range policy.DefaultChecks() {
			latest := c.Versions[len(c.Versions)-1]
			lc := levelCheck{id: c.ID, check: latest.CheckPod}
			switch c.Level {
			case psapi.LevelBaseline:
				baseline = append(baseline, lc)
			case psapi.LevelRestricted:
				restricted = append(restricted, lc)
				for _, o := range latest.OverrideCheckIDs {
					overridden[o] = true
				}
			}
		}
		levelChecks[psapi.LevelBaseline] = baseline
		for _, c := range baseline {
			if !overridden[c.id] {
				levelChecks[psapi.LevelRestricted] = append(levelChecks[psapi.LevelRestricted], c)
			}
		}
		levelChecks[psapi.LevelRestricted] = append(levelChecks[psapi.LevelRestricted], restricted...)
	})
	return levelChecks[level]
}

// level returns the policy's Pod Security level.
func (p Policy) level() psapi.Level {
	if p.Level == "" {
		return DefaultLevel
	}
	return p.Level
}

// strictness orders the levels, privileged first.
var strictness = map[psapi.Level]int{psapi.LevelPrivileged: 0, psapi.LevelBaseline: 1, psapi.LevelRestricted: 2}

// levelFor returns the level pod is checked at: the policy's, or the one
// the pod asks for (validation.AnnotationPodSecurity, its namespace's
// under podsync-vk) when that is stricter. The node's level is the
// ceiling: a pod cannot loosen it.
func (p Policy) levelFor(pod *corev1.Pod) psapi.Level {
	level := p.level()
	if asked, ok := validation.PodSecurityLevel(pod); ok && strictness[asked] > strictness[level] {
		return asked
	}
	return level
}

// checkPodSecurity evaluates the pod against the policy's Pod Security
// level with k8s.io/pod-security-admission's checks, after taking out of
// a copy of the pod what the operator's exemptions allow: each exemption
// narrows one check to the values it names, and the rest of the check (and
// every other check) still applies.
func checkPodSecurity(pod *corev1.Pod, p Policy) Result {
	level := p.levelFor(pod)
	if level == psapi.LevelPrivileged {
		return Result{Admit: true}
	}
	exempt := p.exempted(pod)
	var failed []string
	for _, c := range checksFor(level) {
		r := c.check(&exempt.ObjectMeta, &exempt.Spec)
		if r.Allowed {
			continue
		}
		msg := r.ForbiddenReason
		if r.ForbiddenDetail != "" {
			msg += " (" + r.ForbiddenDetail + ")"
		}
		f := checkFields[c.id]
		msg += fmt.Sprintf(" [check %s", c.id)
		if f.field != "" {
			msg += ", field " + f.field
		}
		if f.exemption != "" {
			msg += ", exemption " + f.exemption
		}
		failed = append(failed, msg+"]")
	}
	if len(failed) == 0 {
		return Result{Admit: true}
	}
	return reject(ReasonPodSecurity, "violates PodSecurity %q: %s", psapi.LevelVersion{Level: level, Version: psapi.LatestVersion()}.String(),
		strings.Join(failed, "; "))
}

// exempted returns a copy of the pod without what the policy's exemptions
// allow.
func (p Policy) exempted(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	spec := &pod.Spec
	if p.AllowHostNetwork {
		spec.HostNetwork = false
	}
	if p.AllowHostPID {
		spec.HostPID = false
	}
	if p.AllowHostIPC {
		spec.HostIPC = false
	}
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool {
		return v.HostPath != nil && p.HostPathAllowed(v.HostPath.Path)
	})
	if sc := spec.SecurityContext; sc != nil && len(p.AllowedUnsafeSysctls) > 0 {
		sc.Sysctls = slices.DeleteFunc(sc.Sysctls, func(s corev1.Sysctl) bool {
			return matchesSysctl(p.AllowedUnsafeSysctls, s.Name)
		})
	}
	exemptContainer := func(c *corev1.Container) {
		if sc := c.SecurityContext; sc != nil {
			if p.AllowPrivileged {
				sc.Privileged = nil
			}
			if caps := sc.Capabilities; caps != nil && len(p.AllowedCapabilities) > 0 {
				caps.Add = slices.DeleteFunc(caps.Add, func(c corev1.Capability) bool {
					return p.capabilityAllowed(string(c))
				})
			}
		}
		c.Ports = slices.DeleteFunc(c.Ports, func(cp corev1.ContainerPort) bool {
			return cp.HostPort != 0 && p.hostPortAllowed(cp.HostPort)
		})
	}
	for i := range spec.InitContainers {
		exemptContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		exemptContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		c := corev1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		exemptContainer(&c)
		spec.EphemeralContainers[i].EphemeralContainerCommon = corev1.EphemeralContainerCommon(c)
	}
	return pod
}

// normalizeCapability is a capability's name as runtimes take it: upper
// case, with or without the CAP_ prefix.
func normalizeCapability(c string) string {
	return strings.TrimPrefix(strings.ToUpper(c), "CAP_")
}

func (p Policy) capabilityAllowed(c string) bool {
	c = normalizeCapability(c)
	for _, a := range p.AllowedCapabilities {
		if normalizeCapability(a) == c {
			return true
		}
	}
	return false
}

func (p Policy) hostPortAllowed(port int32) bool {
	for _, r := range p.AllowedHostPorts {
		if r.Contains(port) {
			return true
		}
	}
	return false
}

// ValidCapability reports whether c names a Linux capability (as the
// operator lists them in --allowed-capabilities): letters, digits and
// underscores, with or without CAP_, or ALL.
func ValidCapability(c string) bool {
	n := normalizeCapability(c)
	if n == "" {
		return false
	}
	for _, r := range n {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}
