package admit

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/validation"
)

func withHostPath(p string) func(*corev1.Pod) {
	return func(pod *corev1.Pod) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p}}})
	}
}

func withSecurityContext(sc corev1.SecurityContext) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = &sc }
}

func withCaps(add ...corev1.Capability) func(*corev1.Pod) {
	return withSecurityContext(corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: add}})
}

func withSysctls(names ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
		}
	}
}

// restrictedContainer is what the restricted level asks of a container.
func restrictedContainer(p *corev1.Pod) {
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

var (
	baseline   = Policy{}
	restricted = Policy{Level: psapi.LevelRestricted}
	privileged = Policy{Level: psapi.LevelPrivileged}
)

func TestCheckPolicy(t *testing.T) {
	hostPort := func(port int32) func(*corev1.Pod) {
		return func(p *corev1.Pod) { withHostPort(p, port, "", corev1.ProtocolTCP) }
	}
	both := func(fs ...func(*corev1.Pod)) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for _, f := range fs {
				f(p)
			}
		}
	}
	tests := []struct {
		name       string
		mutate     func(*corev1.Pod)
		policy     Policy
		wantReason string
		wantIn     []string // substrings of the message
	}{
		{"plain pod passes baseline", func(*corev1.Pod) {}, baseline, "", nil},
		{"plain pod fails restricted", func(*corev1.Pod) {}, restricted, ReasonPodSecurity,
			[]string{`"restricted:latest"`, "allowPrivilegeEscalation != false", "check allowPrivilegeEscalation", "runAsNonRoot != true", "seccompProfile", "unrestricted capabilities"}},
		{"restricted pod passes restricted", restrictedContainer, restricted, "", nil},
		{"anything passes privileged", both(withHostPath("/etc"), withCaps("ALL"), hostPort(22),
			func(p *corev1.Pod) { p.Spec.HostNetwork, p.Spec.HostPID = true, true }), privileged, "", nil},

		// A pod's own level (its namespace's, from podsync-vk): the
		// stricter of it and the node's applies.
		{"a pod asking for restricted on a baseline node", asks("restricted"), baseline, ReasonPodSecurity, []string{`"restricted:latest"`}},
		{"a pod asking for restricted on a privileged node", both(asks("restricted"), withCaps("SYS_ADMIN")), privileged, ReasonPodSecurity,
			[]string{`"restricted:latest"`}},
		{"a restricted pod asking for restricted", both(asks("restricted"), restrictedContainer), privileged, "", nil},
		{"a pod asking for baseline on a privileged node", both(asks("baseline"), withSecurityContext(corev1.SecurityContext{Privileged: ptr.To(true)})),
			privileged, ReasonPodSecurity, []string{`"baseline:latest"`, "check privileged"}},
		{"a pod cannot loosen the node's level", both(asks("privileged"), withCaps("SYS_ADMIN")), baseline, ReasonPodSecurity, []string{`"baseline:latest"`}},
		{"a privileged namespace on a privileged node", both(asks("privileged"), withCaps("SYS_ADMIN")), privileged, "", nil},
		{"the node's exemptions hold under the pod's level", both(asks("baseline"), withCaps("NET_ADMIN")),
			Policy{Level: psapi.LevelPrivileged, AllowedCapabilities: []string{"NET_ADMIN"}}, "", nil},

		// Capabilities, each class: the baseline set, beyond it, ALL.
		{"baseline capability passes", withCaps("NET_BIND_SERVICE", "CHOWN"), baseline, "", nil},
		{"SYS_ADMIN refused", withCaps("SYS_ADMIN"), baseline, ReasonPodSecurity,
			[]string{`"baseline:latest"`, "non-default capabilities", `"SYS_ADMIN"`, "check capabilities_baseline", "securityContext.capabilities.add", "--allowed-capabilities"}},
		{"SYS_MODULE refused", withCaps("SYS_MODULE"), baseline, ReasonPodSecurity, []string{`"SYS_MODULE"`}},
		{"NET_ADMIN refused", withCaps("NET_ADMIN"), baseline, ReasonPodSecurity, []string{`"NET_ADMIN"`}},
		{"ALL refused", withCaps("ALL"), baseline, ReasonPodSecurity, []string{`"ALL"`}},
		{"CAP_ prefix does not slip through", withCaps("CAP_SYS_ADMIN"), baseline, ReasonPodSecurity, []string{`"CAP_SYS_ADMIN"`}},
		{"allowed capability exempted", withCaps("NET_ADMIN"), Policy{AllowedCapabilities: []string{"NET_ADMIN"}}, "", nil},
		{"allowed capability matches with CAP_", withCaps("CAP_NET_ADMIN"), Policy{AllowedCapabilities: []string{"net_admin"}}, "", nil},
		{"an exemption does not open the others", withCaps("NET_ADMIN", "SYS_ADMIN"), Policy{AllowedCapabilities: []string{"NET_ADMIN"}},
			ReasonPodSecurity, []string{`"SYS_ADMIN"`}},
		{"ALL is not implied by each", withCaps("ALL"), Policy{AllowedCapabilities: []string{"SYS_ADMIN", "NET_ADMIN"}}, ReasonPodSecurity, []string{`"ALL"`}},
		{"an allowed capability still needs drop ALL under restricted", both(restrictedContainer, func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		}), Policy{Level: psapi.LevelRestricted, AllowedCapabilities: []string{"NET_ADMIN"}}, "", nil},
		{"restricted refuses an added capability", both(restrictedContainer, func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"CHOWN"}
		}), restricted, ReasonPodSecurity, []string{"check capabilities_restricted"}},

		// Privileged.
		{"privileged container refused", withSecurityContext(corev1.SecurityContext{Privileged: ptr.To(true)}), baseline, ReasonPodSecurity,
			[]string{"privileged", "check privileged", "--allow-privileged"}},
		{"privileged init container refused", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "i", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
		}, baseline, ReasonPodSecurity, []string{`"i"`}},
		{"privileged: false passes", withSecurityContext(corev1.SecurityContext{Privileged: ptr.To(false)}), baseline, "", nil},
		{"privileged exempted", withSecurityContext(corev1.SecurityContext{Privileged: ptr.To(true)}), Policy{AllowPrivileged: true}, "", nil},

		// seccomp and AppArmor.
		{"seccomp Unconfined refused", withSecurityContext(corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}),
			baseline, ReasonPodSecurity, []string{"seccompProfile", "Unconfined"}},
		{"pod seccomp Unconfined refused", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, baseline, ReasonPodSecurity, []string{"seccompProfile"}},
		{"seccomp RuntimeDefault passes", withSecurityContext(corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}), baseline, "", nil},
		{"AppArmor Unconfined refused", withSecurityContext(corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}),
			baseline, ReasonPodSecurity, []string{"appArmorProfile"}},
		{"procMount Unmasked refused", withSecurityContext(corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}), baseline, ReasonPodSecurity, []string{"procMount"}},
		{"SELinux type refused", withSecurityContext(corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}), baseline, ReasonPodSecurity, []string{"seLinuxOptions"}},

		// Host namespaces.
		{"host network refused", func(p *corev1.Pod) { p.Spec.HostNetwork = true }, baseline, ReasonPodSecurity, []string{"hostNetwork=true", "--allow-host-namespaces"}},
		{"host PID refused with host network allowed", func(p *corev1.Pod) { p.Spec.HostPID = true }, Policy{AllowHostNetwork: true}, ReasonPodSecurity, []string{"hostPID=true"}},
		{"host IPC refused with host PID allowed", func(p *corev1.Pod) { p.Spec.HostIPC = true }, Policy{AllowHostPID: true}, ReasonPodSecurity, []string{"hostIPC=true"}},
		{"host namespaces exempted", func(p *corev1.Pod) {
			p.Spec.HostNetwork, p.Spec.HostPID, p.Spec.HostIPC = true, true, true
		}, Policy{AllowHostNetwork: true, AllowHostPID: true, AllowHostIPC: true}, "", nil},

		// Host ports.
		{"hostPort 22 refused", hostPort(22), baseline, ReasonPodSecurity, []string{"hostPort", "22", "check hostPorts", "--allowed-host-ports"}},
		{"hostPort in an allowed range", hostPort(8080), Policy{AllowedHostPorts: []PortRange{{8000, 8099}}}, "", nil},
		{"hostPort outside the allowed range", hostPort(22), Policy{AllowedHostPorts: []PortRange{{8000, 8099}}}, ReasonPodSecurity, []string{"22"}},

		// hostPath.
		{"hostPath refused without allowed prefixes", withHostPath("/var/log"), baseline, ReasonPodSecurity, []string{"hostPath volumes", "--allowed-host-paths"}},
		{"hostPath under an allowed prefix", withHostPath("/srv/data/app"), Policy{AllowedHostPaths: []HostPathPrefix{{Path: "/srv/data"}}}, "", nil},
		{"hostPath equal to an allowed prefix", withHostPath("/srv/data/"), Policy{AllowedHostPaths: []HostPathPrefix{{Path: "/srv/data"}}}, "", nil},
		{"hostPath sharing a name prefix is refused", withHostPath("/srv/database"), Policy{AllowedHostPaths: []HostPathPrefix{{Path: "/srv/data"}}}, ReasonPodSecurity, nil},
		{"hostPath escaping with .. is refused", withHostPath("/srv/data/../../etc"), Policy{AllowedHostPaths: []HostPathPrefix{{Path: "/srv/data"}}}, ReasonPodSecurity, nil},
		{"allowed hostPath under restricted", both(restrictedContainer, withHostPath("/srv/data")), Policy{Level: psapi.LevelRestricted, AllowedHostPaths: []HostPathPrefix{{Path: "/srv"}}}, "", nil},

		// Denied paths: refused at every level, whatever the prefixes.
		{"a denied path is refused under an allowed prefix", withHostPath("/var/lib/podsync"), denyingPolicy, ReasonPolicyHostPath,
			[]string{"is /var/lib/podsync", "podsync's root directory", "always refuses"}},
		{"a path inside a denied one is refused", withHostPath("/var/lib/podsync/pods"), denyingPolicy, ReasonPolicyHostPath, []string{"lies inside /var/lib/podsync"}},
		{"an ancestor of a denied path is refused", withHostPath("/var/lib"), denyingPolicy, ReasonPolicyHostPath, []string{"contains /var/lib/podsync"}},
		{"the root contains every denied path", withHostPath("/"), denyingPolicy, ReasonPolicyHostPath, nil},
		{"a sibling of a denied path passes", withHostPath("/var/lib/podsync-other"), denyingPolicy, "", nil},
		{"a denied path is refused under privileged", withHostPath("/var/lib/podsync/podsync.db"),
			Policy{Level: psapi.LevelPrivileged, DeniedHostPaths: denyingPolicy.DeniedHostPaths}, ReasonPolicyHostPath, []string{"lies inside /var/lib/podsync"}},
		{"privileged admits any other hostPath", withHostPath("/etc"), Policy{Level: psapi.LevelPrivileged, DeniedHostPaths: denyingPolicy.DeniedHostPaths}, "", nil},

		// Sysctls: the kubelet's allowlist at every level.
		{"safe sysctl passes", withSysctls("net.ipv4.ip_unprivileged_port_start"), baseline, "", nil},
		// Pod Security compares names as written; the kubelet normalizes them.
		{"safe sysctl with slashes fails Pod Security", withSysctls("net/ipv4/tcp_syncookies"), baseline, ReasonPodSecurity, nil},
		{"safe sysctl with slashes passes the kubelet's allowlist", withSysctls("net/ipv4/tcp_syncookies"), privileged, "", nil},
		{"unsafe sysctl refused", withSysctls("kernel.msgmax"), baseline, ReasonPodSecurity, []string{"forbidden sysctls", "kernel.msgmax"}},
		{"unsafe sysctl refused under privileged too", withSysctls("kernel.msgmax"), privileged, ReasonSysctlForbidden, []string{`forbidden sysctl: "kernel.msgmax" not allowlisted`}},
		{"allowed unsafe sysctl", withSysctls("kernel.msgmax"), Policy{AllowedUnsafeSysctls: []string{"kernel.msg*"}}, "", nil},
		{"allowed sysctl not with host IPC", both(withSysctls("kernel.msgmax"), func(p *corev1.Pod) { p.Spec.HostIPC = true }),
			Policy{AllowedUnsafeSysctls: []string{"kernel.msg*"}, AllowHostIPC: true}, ReasonSysctlForbidden, []string{"not allowed with host IPC enabled"}},
		{"safe net sysctl not with host network", both(withSysctls("net.ipv4.tcp_syncookies"), func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
			privileged, ReasonSysctlForbidden, []string{"not allowed with host Net enabled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod("a", nil)
			tt.mutate(p)
			before := p.DeepCopy()
			got := CheckPolicy(p, node, tt.policy)
			if got.Reason != tt.wantReason || got.Admit != (tt.wantReason == "") {
				t.Fatalf("CheckPolicy = %+v, want reason %q", got, tt.wantReason)
			}
			for _, w := range tt.wantIn {
				if !strings.Contains(got.Message, w) {
					t.Errorf("message %q does not say %q", got.Message, w)
				}
			}
			if full := Admit(p, nil, node, tt.policy); full.Reason != tt.wantReason {
				t.Errorf("Admit does not apply the policy: %+v, want reason %q", full, tt.wantReason)
			}
			if !equalPods(before, p) {
				t.Errorf("CheckPolicy changed the pod")
			}
		})
	}
}

// asks sets the Pod Security level the pod asks for.
func asks(level string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[validation.AnnotationPodSecurity] = level
	}
}

func equalPods(a, b *corev1.Pod) bool {
	return a.String() == b.String()
}

// TestChecksMatchTheLibrarysEvaluator checks that evaluating the checks one
// by one (to name each) decides as the library's own evaluator does.
func TestChecksMatchTheLibrarysEvaluator(t *testing.T) {
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pods := []func(*corev1.Pod){
		func(*corev1.Pod) {}, restrictedContainer, withCaps("SYS_ADMIN"), withHostPath("/"),
		withSecurityContext(corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To(int64(0))}),
		func(p *corev1.Pod) { withHostPort(p, 80, "", corev1.ProtocolTCP); p.Spec.HostNetwork = true },
		withSysctls("kernel.msgmax", "net.ipv4.tcp_syncookies"),
	}
	for i, mutate := range pods {
		p := pod("a", nil)
		mutate(p)
		for _, level := range []psapi.Level{psapi.LevelBaseline, psapi.LevelRestricted} {
			lib := policy.AggregateCheckResults(ev.EvaluatePod(psapi.LevelVersion{Level: level, Version: psapi.LatestVersion()}, &p.ObjectMeta, &p.Spec))
			var ours []string
			for _, c := range checksFor(level) {
				if r := c.check(&p.ObjectMeta, &p.Spec); !r.Allowed {
					ours = append(ours, r.ForbiddenReason)
				}
			}
			if !slices.Equal(lib.ForbiddenReasons, ours) {
				t.Errorf("pod %d at %s: library forbids %q, ours %q", i, level, lib.ForbiddenReasons, ours)
			}
		}
	}
}

func TestParsePortRange(t *testing.T) {
	for in, want := range map[string]PortRange{"80": {80, 80}, "8000-8099": {8000, 8099}, "1-65535": {1, 65535}} {
		if got, err := ParsePortRange(in); err != nil || got != want {
			t.Errorf("ParsePortRange(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "65536", "90-80", "a", "80-", "-80", "+80", "08"} {
		if _, err := ParsePortRange(in); err == nil {
			t.Errorf("ParsePortRange(%q) succeeded", in)
		}
	}
}

func TestValidateUnsafeSysctls(t *testing.T) {
	for _, ok := range []string{"kernel.msg*", "kernel.shmmax", "net.core.somaxconn", "net.*", "fs.mqueue.*", "net/ipv4/tcp_rmem"} {
		if err := ValidateUnsafeSysctls([]string{ok}); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"kernel.panic", "vm.swappiness", "fs.file-max", "ke*rnel.msgmax"} {
		if err := ValidateUnsafeSysctls([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
