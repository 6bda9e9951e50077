//go:build integration

package cli_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// sleeper is a pod that stays up and stops at once on SIGTERM.
const sleeper = `apiVersion: v1
kind: Pod
metadata: {name: sleeper, labels: {app: sleeper, tier: demo}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: registry.local/busybox:local
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    env: [{name: GREETING, value: hello}]
`

// TestRoundTripAndKubectlFormats, as a user: get -o yaml prints a core/v1
// Pod that convert reads and that run takes back as a no-op (the same
// container, no restart); -o name, jsonpath and custom-columns,
// TYPE/NAME, --show-labels, --field-selector, get nodes, get all and get
// events print what kubectl documents.
func TestRoundTripAndKubectlFormats(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	if r := d.ctl(ctx, sleeper, "run", "--timeout", "2m", "-f", "-"); r.code != 0 {
		t.Fatalf("run: %+v", r)
	}
	before := d.pod(ctx, "sleeper").GetStatus().GetContainerStatuses()[0]

	dump := d.mustCtl(ctx, "get", "pod/sleeper", "-o", "yaml")
	if !strings.HasPrefix(dump, "apiVersion: v1\nkind: Pod\n") || strings.Contains(dump, "sandboxID") || strings.Contains(dump, `restartCount: "`) {
		t.Fatalf("get -o yaml is not a core/v1 Pod:\n%s", dump)
	}
	if r := d.ctl(ctx, dump, "convert", "-f", "-"); r.code != 0 {
		t.Errorf("get -o yaml | convert -f -: %+v", r)
	}
	r := d.ctl(ctx, dump, "run", "--timeout", "2m", "-f", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "1 of 1 pods reached Running") {
		t.Fatalf("get -o yaml | run -f -: %+v", r)
	}
	after := d.pod(ctx, "sleeper").GetStatus().GetContainerStatuses()[0]
	if after.GetContainerId() != before.GetContainerId() || after.GetRestartCount() != 0 {
		t.Errorf("the round trip changed the pod: container %s (restarts %d), was %s", after.GetContainerId(), after.GetRestartCount(), before.GetContainerId())
	}
	if strings.Contains(r.stdout, "kill container") || strings.Contains(r.stdout, "start container") {
		t.Errorf("the round trip killed or started a container:\n%s", r.stdout)
	}

	var list corev1.List
	if err := json.Unmarshal([]byte(d.mustCtl(ctx, "get", "pods", "-o", "json")), &list); err != nil || list.Kind != "List" || len(list.Items) != 1 {
		t.Errorf("get pods -o json: %v, %+v", err, list)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "pods/sleeper", "-o", "name"}, "pod/sleeper\n"},
		{[]string{"get", "po", "sleeper", "-o", "jsonpath={.spec.containers[0].env[0].value}"}, "hello"},
		{[]string{"get", "pods", "-o", "jsonpath={.items[*].metadata.name}"}, "sleeper"},
		{[]string{"get", "pods", "--field-selector", "status.phase=Running", "-o", "name"}, "pod/sleeper\n"},
		{[]string{"get", "pods", "--field-selector", "status.phase!=Running", "-o", "name"}, ""},
	} {
		if got := d.mustCtl(ctx, c.args...); got != c.want {
			t.Errorf("%s = %q, want %q", strings.Join(c.args, " "), got, c.want)
		}
	}
	out := d.mustCtl(ctx, "get", "pods", "-o", "custom-columns=NAME:.metadata.name,IMAGE:.spec.containers[0].image,IP:.status.podIP")
	if !hasRow(out, "NAME", "IMAGE", "IP") || !hasRow(out, "sleeper", "registry.local/busybox:local") {
		t.Errorf("get -o custom-columns:\n%s", out)
	}
	if out := d.mustCtl(ctx, "get", "pods", "--show-labels"); !strings.Contains(out, "LABELS") || !strings.Contains(out, "app=sleeper,tier=demo") {
		t.Errorf("get --show-labels:\n%s", out)
	}
	if out := d.mustCtl(ctx, "get", "all"); !hasRow(out, "default", "pod/sleeper", "1/1", "Running") {
		t.Errorf("get all:\n%s", out)
	}
	if out := d.mustCtl(ctx, "get", "nodes"); !hasRow(out, "NAME", "STATUS", "ROLES", "AGE", "VERSION") || !strings.Contains(out, "Ready") {
		t.Errorf("get nodes:\n%s", out)
	}
	if out := d.mustCtl(ctx, "get", "events", "-n", "default"); !hasRow(out, "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE") ||
		!strings.Contains(out, "Started") || !strings.Contains(out, "pod/sleeper") {
		t.Errorf("get events:\n%s", out)
	}
	if r := d.ctl(ctx, "", "get", "deployment/web"); r.code != 2 {
		t.Errorf("get deployment/web: exit %d, want 2 (usage)", r.code)
	}
}

// unhealthyCount matches describe's line of a repeated Unhealthy event
// and captures its count.
var unhealthyCount = regexp.MustCompile(`Warning\s+Unhealthy\s+\S+ \(x(\d+) over \S+\)\s+kubelet\s+Readiness probe failed:`)

// TestDescribeWhyNotReady, as a user: a pod whose readiness probe fails
// without output; describe shows its container running and not ready and
// the Unhealthy event with a count of 3 and more (the kubelet records
// each failure, the recorder counts them); run --wait-for ready says at
// its timeout why the pod is not ready.
func TestDescribeWhyNotReady(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	const pod = `apiVersion: v1
kind: Pod
metadata: {name: notready}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: registry.local/busybox:local
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    readinessProbe: {exec: {command: ["false"]}, periodSeconds: 1}
`
	// The timeout covers the pod's start too: on a loaded 2-core machine
	// its sandbox and container took 7 s, and a 6 s timeout ended before
	// the first probe.
	r := d.ctl(ctx, pod, "run", "--wait-for", "ready", "--timeout", "15s", "-f", "-")
	if r.code != 1 || !strings.Contains(r.stdout, "TimedOut") ||
		!regexp.MustCompile(`container app running, not ready; last event: Warning Unhealthy( \(x\d+\))?: Readiness probe failed:`).MatchString(r.stdout) {
		t.Errorf("run --wait-for ready of a pod that never gets ready: %+v\nwant its timeout to name the container and its Unhealthy event", r)
	}
	var out string
	eventually(ctx, t, "describe shows Unhealthy (x3 or more)", func() bool {
		out = d.mustCtl(ctx, "describe", "pod", "notready")
		m := unhealthyCount.FindStringSubmatch(out)
		if m == nil {
			return false
		}
		n, _ := strconv.Atoi(m[1])
		return n >= 3
	})
	for _, want := range []string{"Name:", "notready", "State:", "Running", "Ready:", "False", "Readiness:", "exec [false]", "Conditions:", "Events:"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "Readiness probe failed"); n != 1 {
		t.Errorf("describe shows the Unhealthy series %d times, want once with its count:\n%s", n, out)
	}
}

// TestRunFailsFast, as a user: run of an image the registry does not have
// fails before its timeout with the registry's reason; run of a container
// that exits after a second is not reported as running.
func TestRunFailsFast(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	missing := `apiVersion: v1
kind: Pod
metadata: {name: missing}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: app, image: ` + inst.Registry().Ref("nope/missing:v1") + `, imagePullPolicy: Always}
`
	// Failed (not TimedOut) within a 15 s timeout: it did not wait.
	r := d.ctl(ctx, missing, "run", "--timeout", "15s", "-f", "-")
	if r.code != 1 || !hasRow(r.stdout, "default", "missing", "Pending") || !strings.Contains(r.stdout, "Failed") ||
		strings.Contains(r.stdout, "TimedOut") || !strings.Contains(r.stdout, "not found") {
		t.Errorf("run of a missing image: %+v\nwant Failed with the registry's not found before the 15 s timeout", r)
	}
	if n := strings.Count(r.stdout, "ImagePullBackOff"); n > 1 {
		t.Errorf("the back-off printed %d times:\n%s", n, r.stdout)
	}

	const quitter = `apiVersion: v1
kind: Pod
metadata: {name: quitter}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: app, image: registry.local/busybox:local, command: ["sh", "-c", "sleep 1; exit 3"]}
`
	// A container must stay up --min-ready-seconds: 10, so that a status
	// a loaded machine reports late cannot pass for a container that
	// stayed up.
	r = d.ctl(ctx, quitter, "run", "--timeout", "1m", "--min-ready-seconds", "10", "-f", "-")
	if r.code != 1 || strings.Contains(r.stdout, "reached Running") || !strings.Contains(r.stdout, "CrashLoopBackOff") ||
		!strings.Contains(r.stdout, "exit code 3") {
		t.Errorf("run of a container that exits after 1 s: %+v\nwant it failed with CrashLoopBackOff and exit code 3, never reached", r)
	}
}

// TestNodeLimitsAndStatefulSetClaims, as a user of a node whose operator
// set --max-containers-per-pod 1: a pod of two containers is refused
// saying that is the node's limit and which flag raises it; a
// StatefulSet's volumeClaimTemplates become the named volumes data-db-0
// and data-db-1, mounted by its replicas, and a PodDisruptionBudget beside
// it is skipped with a notice.
func TestNodeLimitsAndStatefulSetClaims(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncdArgs(t, "--max-containers-per-pod=1")
	const two = `apiVersion: v1
kind: Pod
metadata: {name: two}
spec:
  containers:
  - {name: a, image: registry.local/busybox:local, command: ["sleep", "60"]}
  - {name: b, image: registry.local/busybox:local, command: ["sleep", "60"]}
`
	r := d.ctl(ctx, two, "run", "-f", "-")
	if r.code != 1 || !strings.Contains(r.stderr, "this node's limit, not Kubernetes'") || !strings.Contains(r.stderr, "--max-containers-per-pod") {
		t.Errorf("run of two containers on a node of one: %+v", r)
	}
	const set = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: db
        image: registry.local/busybox:local
        command: ["sh", "-c", "echo $HOSTNAME > /data/owner; trap 'exit 0' TERM; while true; do sleep 1; done"]
        volumeMounts: [{name: data, mountPath: /data}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db}
spec: {minAvailable: 1, selector: {matchLabels: {app: db}}}
`
	r = d.ctl(ctx, set, "run", "--timeout", "2m", "-f", "-")
	if r.code != 0 || !strings.Contains(r.stderr, "volume/data-db-0 created") || !strings.Contains(r.stderr, "volume/data-db-1 created") ||
		!strings.Contains(r.stderr, "PodDisruptionBudget/db: skipped") {
		t.Fatalf("run of a StatefulSet with volumeClaimTemplates: %+v", r)
	}
	out := d.mustCtl(ctx, "volume", "ls")
	if !hasRow(out, "default", "data-db-0", "default/db-0") || !hasRow(out, "default", "data-db-1", "default/db-1") {
		t.Errorf("volume ls:\n%s", out)
	}
	if got := d.mustCtl(ctx, "exec", "db-1", "--", "cat", "/data/owner"); got != "db-1\n" {
		t.Errorf("db-1's /data/owner = %q, want its own claim", got)
	}
}

// TestGeneratedNamesAndOneRoundOfProblems, as a user on containerd: a pod
// with generateName and no name, run twice, is two pods named as the API
// server names them, both running; apply of it is refused saying why; a
// manifest with four problems of different kinds reports all four at once,
// each with its line and field path.
func TestGeneratedNamesAndOneRoundOfProblems(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	const gen = `apiVersion: v1
kind: Pod
metadata: {generateName: job-}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: app, image: registry.local/busybox:local, command: ["sleep", "600"]}
`
	for range 2 {
		if r := d.ctl(ctx, gen, "run", "--min-ready-seconds", "0", "-f", "-"); r.code != 0 {
			t.Fatalf("run of a generateName pod: %+v", r)
		}
	}
	named := regexp.MustCompile(`^job-[a-z0-9]{5}$`)
	var running []string
	for _, l := range strings.Split(d.mustCtl(ctx, "get", "pods"), "\n") {
		if f := strings.Fields(l); len(f) > 3 && named.MatchString(f[1]) && f[3] == "Running" {
			running = append(running, f[1])
		}
	}
	if len(running) != 2 || running[0] == running[1] {
		t.Errorf("pods named from job-: %v, want two running under names of their own", running)
	}
	if r := d.ctl(ctx, gen, "apply", "-f", "-"); r.code != 1 || !strings.Contains(r.stderr, "a name is generated only by RunPods") {
		t.Errorf("apply of a generateName pod: %+v, want it refused saying why", r)
	}
	const bad = `apiVersion: v1
kind: Pod
metadata: {name: bad}
spec:
  restartPolicy: Sometimes
  containers:
  - name: app
    image: registry.local/busybox:local
    imagee: typo
    resources: {limits: {memory: 12XB}}
    ports: [{containerPort: "eighty"}]
`
	r := d.ctl(ctx, bad, "run", "-f", "-")
	for _, want := range []string{"spec.restartPolicy", "spec.containers[0].imagee", "spec.containers[0].resources.limits.memory", "spec.containers[0].ports[0].containerPort"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("run of a manifest with four problems: no %s in\n%s", want, r.stderr)
		}
	}
	if r.code == 0 || strings.Contains(d.mustCtl(ctx, "get", "pods"), "bad") {
		t.Errorf("the manifest with problems ran: %+v", r)
	}
}
