package conformance

import "strings"

// Focus selects the suite: the Kubernetes v1.37.2 e2e tests of sig-node
// tagged [NodeConformance] or [Conformance], and sig-storage's ConfigMap,
// Secret, Downward API, EmptyDir, Projected, HostPath and Subpath ones.
const Focus = `\[sig-node\].*\[(NodeConformance|Conformance)\]|\[sig-storage\] (ConfigMap|Secrets|Downward API|EmptyDir|Projected|HostPath|Subpath)`

// Skip leaves out what a node conformance run leaves out: tests that take
// the cluster for themselves or break it ([Serial], [Disruptive]), are
// slow or flaky by their own account, or need a feature gate, an alpha or
// a beta API.
const Skip = `\[Serial\]|\[Disruptive\]|\[Slow\]|\[Flaky\]|\[Feature:|\[FeatureGate:|\[Alpha\]|\[Beta\]`

// ciTests are the subset CI runs, within its time: quick tests across the
// suite's areas (pods, env and downward API, volumes of every kind,
// security contexts, init containers and sidecars, lifecycle hooks,
// probes, container runtime), each of which passes on podsync nodes.
var ciTests = []string{
	`\[sig-node\] Pods should get a host IP`,
	`\[sig-node\] Pods should be submitted and removed`,
	`\[sig-node\] Downward API should provide pod name, namespace and IP address as env vars`,
	`\[sig-node\] Variable Expansion should allow composing env vars into new env vars`,
	`\[sig-node\] ConfigMap should be consumable via the environment`,
	`\[sig-storage\] ConfigMap should be consumable from pods in volume \[`,
	`\[sig-storage\] Secrets should be consumable from pods in volume \[`,
	`\[sig-storage\] Projected downwardAPI should provide podname only`,
	`\[sig-storage\] EmptyDir volumes should support \(root,0644,default\)`,
	`\[sig-node\] Security Context When creating a container with runAsUser should run the container with uid 65534`,
	`\[sig-node\] InitContainer should invoke init containers on a RestartAlways pod`,
	`\[sig-node\] Container Lifecycle Hook when create a pod with lifecycle hook should execute poststart exec hook properly`,
	`\[sig-node\] Probing container with readiness probe that fails should never be ready and never restart`,
	`\[sig-node\] Container Runtime blackbox test on terminated container should report termination message from file when pod succeeds and TerminationMessagePolicy FallbackToLogsOnError is set`,
}

// Selection returns the focus and skip of subset: "full" (the suite) or
// "ci" (the tests CI runs); ok is false for another name.
func Selection(subset string) (focus, skip string, ok bool) {
	switch subset {
	case "full":
		return Focus, Skip, true
	case "ci":
		return strings.Join(ciTests, "|"), Skip, true
	}
	return "", "", false
}

// APIServerArgs are the control plane's flags the suite needs beyond the
// harness's: privileged pods are allowed (the tests that run them say so
// with their namespace's Pod Security level).
var APIServerArgs = []string{"--allow-privileged=true"}

// PodsyncdArgs are the podsync nodes' flags the suite needs: the node's
// ceiling of Pod Security is privileged, so that each namespace's own
// level (pod-security.kubernetes.io/enforce, which the tests set) is the
// one enforced.
var PodsyncdArgs = []string{"--pod-security=privileged"}

// E2EArgs are e2e.test's flags for a cluster of kubeconfig, its reports
// written to dir.
func E2EArgs(kubeconfig, dir string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--provider=skeleton",
		"--report-dir=" + dir,
		// No kube-system pods run here (no DNS, no kube-proxy): podsync
		// nodes run the pods the tests make.
		"--minStartupPods=0",
		"--allowed-not-ready-nodes=0",
		"--disable-log-dump",
		"--prepull-images=false",
	}
}
