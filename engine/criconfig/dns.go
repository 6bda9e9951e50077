package criconfig

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/errdefs"
)

// PodHostnameAndDomain is the kubelet's GeneratePodHostNameAndDomain: the
// pod's hostname and domain. spec.hostnameOverride, when set, is the
// hostname (a DNS-1123 subdomain: dots allowed), without a domain,
// whatever the name, hostname and subdomain say; otherwise the hostname is
// spec.hostname or the pod's name, and a subdomain gives the domain
// <subdomain>.<namespace>.svc.<cluster domain>. A hostname longer than 63
// characters is truncated as the kubelet truncates it. A value that is not
// a valid name is an error wrapping ErrInvalidSpec (validation refuses it
// first).
func PodHostnameAndDomain(pod *corev1.Pod, opts Options) (string, string, error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s: %w", *o, strings.Join(msgs, ";"), errdefs.ErrInvalidSpec)
		}
		hostname, err := truncateHostname(pod.Name, *o)
		return hostname, "", err
	}
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s: %w", pod.Spec.Hostname, strings.Join(msgs, ";"), errdefs.ErrInvalidSpec)
		}
		hostname = pod.Spec.Hostname
	}
	hostname, err := truncateHostname(pod.Name, hostname)
	if err != nil {
		return "", "", err
	}
	domain := ""
	if pod.Spec.Subdomain != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Subdomain); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s: %w", pod.Spec.Subdomain, strings.Join(msgs, ";"), errdefs.ErrInvalidSpec)
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, opts.ClusterDomain)
	}
	return hostname, domain, nil
}

// hostnameMaxLen is the kubelet's cap on a hostname: the kernel's 64
// bytes less the terminating NUL.
const hostnameMaxLen = 63

// truncateHostname is the kubelet's truncatePodHostnameIfNeeded: a
// hostname over 63 characters is cut there, without a trailing '-' or
// '.'.
func truncateHostname(podName, hostname string) (string, error) {
	if len(hostname) <= hostnameMaxLen {
		return hostname, nil
	}
	truncated := strings.TrimRight(hostname[:hostnameMaxLen], "-.")
	if truncated == "" {
		return "", fmt.Errorf("hostname for pod %q was invalid: %q: %w", podName, hostname, errdefs.ErrInvalidSpec)
	}
	return truncated, nil
}

// podDNS is the kubelet's GetPodDNS: the resolver configuration from the
// pod's dnsPolicy and dnsConfig, the cluster DNS settings and the host's.
func podDNS(pod *corev1.Pod, opts Options) (*runtimeapi.DNSConfig, error) {
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
