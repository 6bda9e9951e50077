package model

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// The container restart policy and rules of KEP-5307 (ContainerRestartRules,
// beta and on by default since Kubernetes v1.35), as the kubelet reads
// them (k8s.io/kubernetes/pkg/api/v1/pod). podsync supports the Restart
// action only: validation refuses RestartAllContainers.

// IsContainerRestartable is the kubelet's podutil.IsContainerRestartable:
// a container may be restarted when its own restart policy (or, without
// one, the pod's) is not Never, or when one of its rules restarts it.
func IsContainerRestartable(spec *corev1.PodSpec, c *corev1.Container) bool {
	if c.RestartPolicy != nil {
		for _, r := range c.RestartPolicyRules {
			if r.Action == corev1.ContainerRestartRuleActionRestart {
				return true
			}
		}
		return *c.RestartPolicy != corev1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != corev1.RestartPolicyNever
}

// ContainerShouldRestart is the kubelet's podutil.ContainerShouldRestart:
// whether c, exited with exitCode, is restarted. Its restart rules are
// evaluated in order, and the first that matches decides; then its own
// restart policy; then, when it has none, the pod's.
func ContainerShouldRestart(spec *corev1.PodSpec, c *corev1.Container, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if r, ok := MatchingRestartRule(c, exitCode); ok && r.Action == corev1.ContainerRestartRuleActionRestart {
			return true
		}
		switch *c.RestartPolicy {
		case corev1.ContainerRestartPolicyAlways:
			return true
		case corev1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case corev1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	case corev1.RestartPolicyNever:
		return false
	}
	return true
}

// MatchingRestartRule is the kubelet's FindMatchingContainerRestartRule:
// the first of c's restart rules whose exit codes match exitCode.
func MatchingRestartRule(c *corev1.Container, exitCode int32) (corev1.ContainerRestartRule, bool) {
	for _, r := range c.RestartPolicyRules {
		if r.ExitCodes == nil {
			continue
		}
		in := slices.Contains(r.ExitCodes.Values, exitCode)
		switch r.ExitCodes.Operator {
		case corev1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return r, true
			}
		case corev1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return r, true
			}
		}
	}
	return corev1.ContainerRestartRule{}, false
}
