package admit

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
)

// ReasonSysctlForbidden is the kubelet's reason for a pod naming a sysctl
// the node does not allow.
const ReasonSysctlForbidden = "SysctlForbidden"

// safeSysctl is one of the kubelet's safe sysctls
// (pkg/kubelet/sysctl/safe_sysctls.go): namespaced and isolated, so a pod
// setting it affects no other pod. kernel is the first kernel version
// where it is namespaced ("" for all).
type safeSysctl struct{ name, kernel string }

var safeSysctls = []safeSysctl{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", "4.15"},
	{"net.ipv4.tcp_wmem", "4.15"},
	{"net.ipv4.tcp_slow_start_after_idle", "4.15"},
	{"net.ipv4.tcp_notsent_lowat", "4.6"},
}

// sysctlNamespace is the kernel namespace a sysctl belongs to, as
// k8s.io/component-helpers/node/util/sysctl knows them; "" if it is not
// known to be namespaced.
func sysctlNamespace(name string) string {
	switch name {
	case "kernel.domainname":
		return "UTS"
	case "kernel.sem", "kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced", "kernel.shm",
		"kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.msg":
		return "IPC"
	}
	for prefix, ns := range map[string]string{"net": "Net", "fs.mqueue": "IPC", "user": "User"} {
		if strings.HasPrefix(name, prefix+".") {
			return ns
		}
	}
	return ""
}

// matchesSysctl reports whether name is one of patterns (a name, or a
// prefix ending in *).
func matchesSysctl(patterns []string, name string) bool {
	name = criconfig.NormalizeSysctl(name)
	for _, p := range patterns {
		p = criconfig.NormalizeSysctl(p)
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if p == name {
			return true
		}
	}
	return false
}

// ValidateUnsafeSysctls checks the operator's --allowed-unsafe-sysctls as
// the kubelet does: each a sysctl or a prefix ending in *, known to be
// namespaced.
func ValidateUnsafeSysctls(patterns []string) error {
	for _, p := range patterns {
		n := criconfig.NormalizeSysctl(p)
		if prefix, ok := strings.CutSuffix(n, "*"); ok {
			n = strings.TrimSuffix(prefix, ".")
			if strings.Contains(n, "*") {
				return fmt.Errorf("sysctl pattern %q: only a trailing * is allowed", p)
			}
			if sysctlNamespace(n) == "" && sysctlNamespace(n+".x") == "" {
				return fmt.Errorf("the sysctls %q are not known to be namespaced", p)
			}
			continue
		}
		if sysctlNamespace(n) == "" {
			return fmt.Errorf("the sysctl %q is not known to be namespaced", p)
		}
	}
	return nil
}

// kernelAtLeast compares "major.minor[...]" versions; an unknown kernel
// (empty or unparsable have) counts as new enough.
func kernelAtLeast(have, want string) bool {
	var hMaj, hMin, wMaj, wMin int
	if _, err := fmt.Sscanf(have, "%d.%d", &hMaj, &hMin); err != nil {
		return true
	}
	if _, err := fmt.Sscanf(want, "%d.%d", &wMaj, &wMin); err != nil {
		return true
	}
	return hMaj > wMaj || (hMaj == wMaj && hMin >= wMin)
}

// checkSysctls is the kubelet's sysctl admission (pkg/kubelet/sysctl
// allowlist.go), at every Pod Security level: a pod may set the safe
// sysctls of its kernel and those the operator allows, and none of the
// network, IPC or user namespace when it shares that namespace with the
// host.
func checkSysctls(pod *corev1.Pod, node Node, p Policy) Result {
	sc := pod.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return Result{Admit: true}
	}
	hostUsers := pod.Spec.HostUsers == nil || *pod.Spec.HostUsers
	for _, s := range sc.Sysctls {
		name := criconfig.NormalizeSysctl(s.Name)
		allowed := matchesSysctl(p.AllowedUnsafeSysctls, name)
		safe := false
		for _, ss := range safeSysctls {
			if ss.name == name && (ss.kernel == "" || kernelAtLeast(node.KernelVersion, ss.kernel)) {
				safe = true
			}
		}
		if !allowed && !safe {
			return reject(ReasonSysctlForbidden, "forbidden sysctl: %q not allowlisted (the node allows the safe sysctls and those of --allowed-unsafe-sysctls)", name)
		}
		switch sysctlNamespace(name) {
		case "Net":
			if pod.Spec.HostNetwork {
				return reject(ReasonSysctlForbidden, "forbidden sysctl: %q not allowed with host Net enabled", name)
			}
		case "IPC":
			if pod.Spec.HostIPC {
				return reject(ReasonSysctlForbidden, "forbidden sysctl: %q not allowed with host IPC enabled", name)
			}
		case "User":
			if hostUsers {
				return reject(ReasonSysctlForbidden, "forbidden sysctl: %q not allowed with host User enabled", name)
			}
		}
	}
	return Result{Admit: true}
}
