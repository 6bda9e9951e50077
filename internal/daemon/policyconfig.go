package daemon

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/podsync/podsync/engine/admit"
)

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
