package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/server"
)

// The commands are tested against an in-process podsyncd (see
// harness_test.go).

// writeManifest writes a manifest into a fresh directory and returns its
// path.
func writeManifest(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// podManifest is a one-container pod of the test image.
func podManifest(name, script string, extra string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  labels: {app: " + name + "}\nspec:\n" + extra +
		"  containers:\n  - name: app\n    image: " + testImage + "\n    command: [sh, -c, " + strconvQuote(script) + "]\n"
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// lines returns the non-empty lines of s that contain every word.
func linesWith(s string, words ...string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		ok := l != ""
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// hasRow reports whether out has a table row whose first fields are
// fields.
func hasRow(out string, fields ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

func mustSucceed(t *testing.T, what string, r result) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", what, r.code, r.stdout, r.stderr)
	}
}

// TestRunGetPlanSyncDelete walks through a pod's life: run the examples,
// list them, plan and sync a change, delete.
func TestRunGetPlanSyncDelete(t *testing.T) {
	d := startPodsyncd(t)
	// web's readiness probe never passes on the fake runtime: running is
	// enough here.
	r := d.run(t, "", "run", "--min-ready-seconds", "0", "-f", "../../examples/web.yaml", "-f", "../../examples/init-sidecar.yaml", "-f", "../../examples/config.yaml")
	mustSucceed(t, "run", r)
	for _, want := range [][]string{
		{"default/web", "create sandbox", "ok", "attempt 0"},
		{"default/web", "start container httpd", "ok"},
		{"default/init-sidecar", "start init container prepare", "ok"},
		{"NAMESPACE", "NAME", "PHASE", "READY", "RESTARTS", "RESULT", "REASON"},
		{"default", "web", "Running", "0/1", "OK"},
		{"default", "init-sidecar", "Running", "2/2", "OK"},
		{"3 of 3 pods reached Running"},
	} {
		if len(linesWith(r.stdout, want...)) == 0 {
			t.Errorf("run output has no line with %q:\n%s", want, r.stdout)
		}
	}

	r = d.run(t, "", "ls")
	mustSucceed(t, "ls", r)
	rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(rows) != 4 || strings.Join(strings.Fields(rows[0]), " ") != "NAMESPACE NAME READY STATUS RESTARTS AGE" {
		t.Fatalf("ls:\n%s", r.stdout)
	}
	for i, want := range []string{"default config 1/1 Running 0", "default init-sidecar 2/2 Running 0", "default web 0/1 Running 0"} {
		if got := strings.Join(strings.Fields(rows[i+1])[:5], " "); got != want {
			t.Errorf("ls row %d = %q, want %q", i+1, got, want)
		}
	}
	r = d.run(t, "", "get", "pods", "-l", "app=web", "-o", "wide")
	mustSucceed(t, "get -l -o wide", r)
	if rows := linesWith(r.stdout, "web", "node-1", "Burstable"); len(rows) != 1 || len(linesWith(r.stdout, "config")) != 0 {
		t.Errorf("get -l app=web -o wide:\n%s", r.stdout)
	}
	r = d.run(t, "", "get", "-n", "other")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "No resources found in other namespace.") {
		t.Errorf("get -n other: %+v", r)
	}

	r = d.run(t, "", "plan", "-f", "../../examples/web.yaml")
	mustSucceed(t, "plan", r)
	if !strings.Contains(r.stdout, "plan for default/web (known to podsyncd") || !strings.Contains(r.stdout, "= up to date") {
		t.Errorf("plan of the running web pod:\n%s", r.stdout)
	}
	web, err := os.ReadFile("../../examples/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changed := writeManifest(t, "web.yaml", strings.Replace(string(web), "httpd -f -p 8080", "httpd -f -v -p 8080", 1))
	r = d.run(t, "", "plan", "-f", changed)
	mustSucceed(t, "plan of a change", r)
	if len(linesWith(r.stdout, "- kill container httpd", "changed: args", "then start it again")) != 1 ||
		len(linesWith(r.stdout, "+ start container httpd", "restart 1")) != 1 {
		t.Errorf("plan of a changed pod:\n%s", r.stdout)
	}
	r = d.run(t, "", "sync", "-f", changed)
	mustSucceed(t, "sync of a change", r)
	for _, want := range [][]string{
		{"kill container httpd", "ok", "reason: "},
		{"start container httpd", "ok", "restart 1"},
		{"pod default/web synced: Running, 0/1 ready, restarts 1"},
	} {
		if len(linesWith(r.stdout, want...)) == 0 {
			t.Errorf("sync output has no line with %q:\n%s", want, r.stdout)
		}
	}

	r = d.run(t, "", "delete", "-f", "../../examples/web.yaml", "-f", "../../examples/config.yaml", "--grace-period", "0")
	mustSucceed(t, "delete -f", r)
	if r.stdout != "pod \"default/web\" deleted\npod \"default/config\" deleted\n" {
		t.Errorf("delete -f: %q", r.stdout)
	}
	r = d.run(t, "", "get", "web")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "error: ") || !strings.Contains(r.stderr, "not found") {
		t.Errorf("get of a deleted pod: %+v", r)
	}
	r = d.run(t, "", "delete", "web")
	if r.code != 1 || r.stderr != "error: pod \"default/web\" not found\n" {
		t.Errorf("delete of a deleted pod: %+v", r)
	}
	mustSucceed(t, "delete --ignore-not-found", d.run(t, "", "delete", "web", "--ignore-not-found"))
	mustSucceed(t, "delete --all", d.run(t, "", "delete", "--all"))
	if len(d.rt.Sandboxes) != 0 {
		// The fake's state is read without its lock: every call is done.
		t.Errorf("sandboxes left after delete --all: %d", len(d.rt.Sandboxes))
	}
}

// TestRunReportsFailures: a pod refused by admission makes run exit 1,
// with the reason in the table and the error.
func TestRunReportsFailures(t *testing.T) {
	d := startPodsyncd(t)
	two := writeManifest(t, "two.yaml",
		podManifest("first", "sleep 1000", "")+"    ports: [{containerPort: 80, hostPort: 18080}]\n---\n"+
			podManifest("second", "sleep 1000", "")+"    ports: [{containerPort: 80, hostPort: 18080}]\n")
	r := d.run(t, "", "run", "-f", two)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1: %+v", r.code, r)
	}
	if !hasRow(r.stdout, "default", "second", "<none>", "<none>", "<none>", "Rejected", "NodePorts") ||
		len(linesWith(r.stdout, "default/second: Rejected (NodePorts): Predicate NodePorts failed")) != 1 {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	if r.stderr != "error: 1 of 2 pods did not reach Running: 1 rejected\n" {
		t.Errorf("stderr = %q", r.stderr)
	}

	// All or nothing: the first is refused too, and nothing new runs.
	three := writeManifest(t, "three.yaml", podManifest("third", "sleep 1000", "")+"---\n"+
		podManifest("fourth", "sleep 1000", "")+"    ports: [{containerPort: 80, hostPort: 18080}]\n")
	r = d.run(t, "", "run", "--all-or-nothing", "-f", three)
	if r.code != 1 || !hasRow(r.stdout, "default", "third", "<none>", "<none>", "<none>", "Rejected", "NotRunAllOrNothing") {
		t.Errorf("--all-or-nothing: %+v", r)
	}

	// A pod that fails before its target.
	job := writeManifest(t, "job.yaml", podManifest("failing-job", "echo oops; exit 3", "  restartPolicy: Never\n"))
	r = d.run(t, "", "run", "--wait-for", "succeeded", "--timeout", "10s", "-f", job)
	if r.code != 1 || !hasRow(r.stdout, "default", "failing-job", "Failed", "0/1", "0", "Failed", "PodFailed") ||
		r.stderr != "error: 1 of 1 pods did not reach Succeeded: 1 failed\n" {
		t.Errorf("failing job: %+v", r)
	}
	if len(linesWith(r.stdout, "container app:", "exit code 3")) != 1 || len(linesWith(r.stdout, "| oops")) != 1 {
		t.Errorf("failing job's details:\n%s", r.stdout)
	}
}

// TestInvalidRequest: podsyncd's field violations — here what only
// podsyncd knows, its node name: podsyncctl checks the rest before it
// sends — are printed one per line, with exit code 1.
func TestInvalidRequest(t *testing.T) {
	td := testdaemon.New(t, testdaemon.Options{Images: []string{testImage}, Service: func(o *server.ServiceOptions) {
		o.Validator = &server.Validator{NodeName: testdaemon.NodeName, Limits: server.Limits{MaxContainersPerPod: 1}}
	}})
	d := &podsyncd{rt: td.Runtime, address: td.Target}
	bad := "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  nodeName: elsewhere\n  containers:\n  - name: app\n    image: " + testImage +
		"\n  - name: second\n    image: " + testImage + "\n"
	r := d.run(t, bad, "run", "-f", "-")
	if r.code != 1 || r.stdout != "" {
		t.Errorf("exit %d, stdout %q", r.code, r.stdout)
	}
	golden(t, "error-violations.txt", r.stderr)
}

// TestOutputJSON: -o json prints the API's messages, one object each.
func TestOutputJSON(t *testing.T) {
	d := startPodsyncd(t)
	r := d.run(t, "", "plan", "-f", "../../examples/init-sidecar.yaml", "-o", "json")
	mustSucceed(t, "plan -o json", r)
	var plan podsyncv1.PlanPodResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &plan); err != nil {
		t.Fatalf("plan -o json is not a PlanPodResponse: %v\n%s", err, r.stdout)
	}
	// The status holds times; the plan does not.
	plan.Status = nil
	out, err := marshalJSON(&plan)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "plan-new.json", string(out))

	r = d.run(t, "", "run", "-f", "../../examples/config.yaml", "-o", "json")
	mustSucceed(t, "run -o json", r)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	var msgs []*podsyncv1.RunPodsResponse
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("run -o json: %v\n%s", err, r.stdout)
		}
		var m podsyncv1.RunPodsResponse
		if err := protojson.Unmarshal(raw, &m); err != nil {
			t.Fatalf("not a RunPodsResponse: %v: %s", err, raw)
		}
		msgs = append(msgs, &m)
	}
	if len(msgs) < 3 || msgs[0].GetStep() == nil || msgs[len(msgs)-1].GetSummary().GetReachedTarget() != 1 {
		t.Errorf("run -o json: %d messages, want steps first and the summary last:\n%s", len(msgs), r.stdout)
	}

	r = d.run(t, "", "get", "config", "-o", "json")
	mustSucceed(t, "get -o json", r)
	var kpod corev1.Pod
	if err := json.Unmarshal([]byte(r.stdout), &kpod); err != nil || kpod.Kind != "Pod" || kpod.APIVersion != "v1" || kpod.Status.Phase != corev1.PodRunning {
		t.Errorf("get NAME -o json is not a running core/v1 Pod (%v):\n%s", err, r.stdout)
	}
	if strings.Contains(r.stdout, "sandboxID") || strings.Contains(r.stdout, `"restartCount": "`) {
		t.Errorf("get NAME -o json has the API's fields or int64 strings:\n%s", r.stdout)
	}
	r = d.run(t, "", "get", "config", "-o", "proto-json")
	mustSucceed(t, "get -o proto-json", r)
	var pod podsyncv1.Pod
	if err := protojson.Unmarshal([]byte(r.stdout), &pod); err != nil || pod.GetStatus().GetSandboxId() == "" {
		t.Errorf("get NAME -o proto-json is not the API's Pod (%v):\n%s", err, r.stdout)
	}
	r = d.run(t, "", "ls", "-o", "yaml")
	mustSucceed(t, "ls -o yaml", r)
	if !strings.HasPrefix(r.stdout, "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n") || !strings.Contains(r.stdout, "kind: List\n") {
		t.Errorf("ls -o yaml is not a List:\n%s", r.stdout)
	}
	r = d.run(t, "", "delete", "config", "-o", "yaml")
	mustSucceed(t, "delete -o yaml", r)
	if !strings.Contains(r.stdout, "found: true\n") {
		t.Errorf("delete -o yaml:\n%s", r.stdout)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// background runs podsyncctl until cancel; wait returns its exit code.
func (d *podsyncd) background(t *testing.T, out *syncBuffer, args ...string) (cancel func(), wait func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	errOut := &syncBuffer{}
	a := &app{stdin: strings.NewReader(""), stdout: out, stderr: errOut, getenv: func(k string) string { return d.env()[k] },
		now: func() time.Time { return fixedNow }}
	go func() { done <- a.main(ctx, args) }()
	return cancel, func() int {
		code := <-done
		if code != 0 {
			t.Logf("stderr: %s", errOut.String())
		}
		return code
	}
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLogsAndWatch: logs with --tail, --timestamps and -f, and watch,
// end with exit 0 when interrupted.
func TestLogsAndWatch(t *testing.T) {
	d := startPodsyncd(t)
	watchOut := &syncBuffer{}
	stopWatch, waitWatch := d.background(t, watchOut, "watch")

	m := writeManifest(t, "talker.yaml", podManifest("talker", "echo one; echo two; sleep 1000", ""))
	mustSucceed(t, "run", d.run(t, "", "run", "-f", m))
	r := d.run(t, "", "logs", "talker")
	mustSucceed(t, "logs", r)
	if r.stdout != "one\ntwo\n" {
		t.Errorf("logs = %q", r.stdout)
	}
	r = d.run(t, "", "logs", "talker", "--tail", "1", "--timestamps")
	mustSucceed(t, "logs --tail --timestamps", r)
	if fields := strings.Fields(r.stdout); len(fields) != 2 || fields[1] != "two" {
		t.Errorf("logs --tail 1 --timestamps = %q", r.stdout)
	} else if _, err := time.Parse(time.RFC3339Nano, fields[0]); err != nil {
		t.Errorf("timestamp %q: %v", fields[0], err)
	}
	r = d.run(t, "", "logs", "talker", "-c", "nope")
	if r.code != 1 || !strings.Contains(r.stderr, "nope") {
		t.Errorf("logs of an unknown container: %+v", r)
	}

	out := &syncBuffer{}
	stop, wait := d.background(t, out, "logs", "-f", "talker")
	eventually(t, "logs -f prints the old lines", func() bool { return out.String() == "one\ntwo\n" })
	var pod podsyncv1.Pod
	r = d.run(t, "", "get", "talker", "-o", "proto-json")
	if err := protojson.Unmarshal([]byte(r.stdout), &pod); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimPrefix(pod.GetStatus().GetContainerStatuses()[0].GetContainerId(), "containerd://")
	if err := d.rt.WriteLog(id, "stdout", "three"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "logs -f prints a new line", func() bool { return out.String() == "one\ntwo\nthree\n" })
	stop()
	if code := wait(); code != 0 {
		t.Errorf("logs -f ended with %d, want 0 on interrupt", code)
	}

	eventually(t, "watch shows the pod", func() bool {
		return len(linesWith(watchOut.String(), "default/talker", "Running 1/1 ready")) > 0 &&
			len(linesWith(watchOut.String(), "default/talker", "Normal Started")) > 0
	})
	mustSucceed(t, "delete", d.run(t, "", "delete", "talker"))
	eventually(t, "watch shows the deletion", func() bool { return len(linesWith(watchOut.String(), "default/talker", "deleted")) == 1 })
	stopWatch()
	if code := waitWatch(); code != 0 {
		t.Errorf("watch ended with %d, want 0 on interrupt", code)
	}
	if !strings.HasPrefix(watchOut.String(), "REVISION  POD ") {
		t.Errorf("watch output:\n%s", watchOut.String())
	}
}

func TestHealthVersionCompletion(t *testing.T) {
	d := startPodsyncd(t)
	r := d.run(t, "", "health")
	if r.code != 0 || r.stdout != "SERVING\n" {
		t.Errorf("health: %+v", r)
	}
	r = d.run(t, "", "version")
	if r.code != 0 || len(linesWith(r.stdout, "server: podsyncd at unix://", "SERVING")) != 1 {
		t.Errorf("version: %+v", r)
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if r := d.run(t, "", "completion", shell); r.code != 0 || len(r.stdout) < 100 {
			t.Errorf("completion %s: exit %d, %d bytes", shell, r.code, len(r.stdout))
		}
	}
	mustSucceed(t, "run", d.run(t, "", "run", "-f", "../../examples/config.yaml"))
	r = d.run(t, "", "__complete", "logs", "co")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "config\n") {
		t.Errorf("completion of pod names: %+v", r)
	}
}

// TestTCP: a TCP address needs TLS, or --insecure for a loopback
// development listener.
func TestTCP(t *testing.T) {
	d := startPodsyncdOn(t, true)
	r := d.run(t, "", "health")
	if r.code != 2 || !strings.Contains(r.stderr, "TCP needs mutual TLS (--tls-cert-file, --tls-key-file, --tls-ca-file), or --insecure") {
		t.Errorf("health over TCP without TLS or --insecure: %+v", r)
	}
	r = d.run(t, "", "health", "--insecure")
	if r.code != 0 || r.stdout != "SERVING\n" {
		t.Errorf("health --insecure: %+v", r)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("address: "+d.address+"\ninsecure: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "", "--config", cfg, "health")
	if r.code != 0 || r.stdout != "SERVING\n" {
		t.Errorf("health with the config file: %+v", r)
	}
}

// TestRunDeleteDeployment: `run -f` of a Deployment of three replicas
// gives three pods named after it, the Service beside it skipped with a
// notice; re-applied with fewer replicas, the extra pods go; `delete -f`
// removes every pod of the Deployment.
func TestRunDeleteDeployment(t *testing.T) {
	d := startPodsyncd(t)
	const file = "../../testdata/workloads/deployment.yaml"
	r := d.run(t, "", "run", "-f", file)
	mustSucceed(t, "run", r)
	if !strings.Contains(r.stdout, "3 of 3 pods reached Running") || !strings.Contains(r.stderr, `notice: `+file+`:4: Service/web: skipped`) {
		t.Errorf("run of a Deployment:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	r = d.run(t, "", "get", "-l", "podsync.io/workload-kind=Deployment,podsync.io/workload-name=web")
	mustSucceed(t, "get -l", r)
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		if len(linesWith(r.stdout, "default", name, "Running")) != 1 {
			t.Errorf("get has no running %s:\n%s", name, r.stdout)
		}
	}
	// Re-applied with one replica: web-1 and web-2 go.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	one := writeManifest(t, "one.yaml", strings.Replace(string(data), "replicas: 3", "replicas: 1", 1))
	r = d.run(t, "", "run", "-f", one)
	mustSucceed(t, "run with one replica", r)
	if !strings.Contains(r.stderr, `notice: pod "default/web-1" deleted: its workload has fewer replicas now`) ||
		!strings.Contains(r.stderr, `notice: pod "default/web-2" deleted`) || !strings.Contains(r.stdout, "1 of 1 pods reached Running") {
		t.Errorf("run with fewer replicas:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	r = d.run(t, "", "run", "-f", file)
	mustSucceed(t, "run with three again", r)
	// delete -f of the one-replica file removes every pod of the
	// Deployment.
	r = d.run(t, "", "delete", "-f", one, "--grace-period", "0")
	mustSucceed(t, "delete -f", r)
	if r.stdout != "pod \"default/web-0\" deleted\npod \"default/web-1\" deleted\npod \"default/web-2\" deleted\n" {
		t.Errorf("delete -f: %q", r.stdout)
	}
	if r = d.run(t, "", "ls"); r.stdout != "" {
		t.Errorf("pods left after delete -f:\n%s", r.stdout)
	}
}

// TestNodeShowsLabelsAndResources: `podsyncctl node` prints the node's
// name, the labels podsyncd sets itself, its taints and resources (here
// none limited), and -o json the API's Node.
func TestNodeShowsLabelsAndResources(t *testing.T) {
	d := startPodsyncd(t)
	r := d.run(t, "", "node")
	mustSucceed(t, "node", r)
	for _, want := range [][]string{
		{"Name:", "node-1"},
		{"Labels:", "kubernetes.io/arch=" + runtime.GOARCH},
		{"kubernetes.io/hostname=node-1"},
		{"kubernetes.io/os=" + runtime.GOOS},
		{"Taints:", "<none>"},
		{"Capacity:"},
		{"Allocatable:"},
		{"System Info:"},
		{"Kernel Version:", testdaemon.SystemInfo.KernelVersion},
		{"OS Image:", testdaemon.SystemInfo.OSImage},
		{"Container Runtime Version:", "fakeRuntime://0.1.0"},
	} {
		if len(linesWith(r.stdout, want...)) != 1 {
			t.Errorf("node output has no line with %q:\n%s", want, r.stdout)
		}
	}
	r = d.run(t, "", "node", "-o", "json")
	mustSucceed(t, "node -o json", r)
	var n podsyncv1.Node
	if err := protojson.Unmarshal([]byte(r.stdout), &n); err != nil || n.GetLabels()["kubernetes.io/hostname"] != "node-1" {
		t.Errorf("node -o json = %v (%v):\n%s", &n, err, r.stdout)
	}
}

func TestPrintNode(t *testing.T) {
	var b strings.Builder
	err := printNode(&b, &podsyncv1.Node{
		Name:        "n1",
		Labels:      map[string]string{"disk": "ssd", "kubernetes.io/os": "linux"},
		Taints:      []*podsyncv1.Taint{{Key: "dedicated", Value: "db", Effect: "NoSchedule"}, {Key: "maintenance", Effect: "NoExecute"}},
		Capacity:    map[string]string{"cpu": "4", "memory": "8Gi", "pods": "110"},
		Allocatable: map[string]string{"cpu": "3500m", "memory": "7Gi", "pods": "110"},
		Lease: &podsyncv1.Lease{Holder: "cn:controller-a", Epoch: 3,
			RenewTime: timestamppb.New(fixedNow), ExpireTime: timestamppb.New(fixedNow.Add(15 * time.Second))},
		RequireLease: true,
		SystemInfo: &podsyncv1.NodeSystemInfo{MachineId: "3d1219c7c4c5404aaa1f6d2a48adfda4", BootId: "3834f90e-e1b6-4f78-bff4-79fbb76efc09",
			KernelVersion: "6.1.0-18-amd64", OsImage: "Debian GNU/Linux 12 (bookworm)", ContainerRuntimeVersion: "containerd://2.1.4",
			OperatingSystem: "linux", Architecture: "amd64"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `Name:         n1
Labels:       disk=ssd
              kubernetes.io/os=linux
Taints:       dedicated=db:NoSchedule
              maintenance:NoExecute
Capacity:
  cpu:              4
  memory:           8Gi
  pods:             110
Allocatable:
  cpu:              3500m
  memory:           7Gi
  pods:             110
System Info:
  Machine ID:                 3d1219c7c4c5404aaa1f6d2a48adfda4
  System UUID:
  Boot ID:                    3834f90e-e1b6-4f78-bff4-79fbb76efc09
  Kernel Version:             6.1.0-18-amd64
  OS Image:                   Debian GNU/Linux 12 (bookworm)
  Operating System:           linux
  Architecture:               amd64
  Container Runtime Version:  containerd://2.1.4
Lease:        cn:controller-a (epoch 3, renewed ` + fixedNow.UTC().Format(time.RFC3339) + `, expires ` + fixedNow.Add(15*time.Second).UTC().Format(time.RFC3339) + `)
RequireLease: true
`
	if b.String() != want {
		t.Errorf("printNode:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestDeleteByUIDKeepsANewerIncarnation: delete --uid of a pod's old
// incarnation fails and leaves the new one; its own uid deletes it.
func TestDeleteByUIDKeepsANewerIncarnation(t *testing.T) {
	d := startPodsyncd(t)
	manifest := func(uid string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: web, uid: " + uid + "}\nspec:\n  containers:\n  - name: app\n    image: " + testImage +
			"\n    command: [sleep, inf]\n"
	}
	const old, cur = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	mustSucceed(t, "sync old", d.run(t, manifest(old), "sync", "-f", "-"))
	mustSucceed(t, "delete", d.run(t, "", "delete", "web", "--grace-period", "0"))
	mustSucceed(t, "sync new", d.run(t, manifest(cur), "sync", "-f", "-"))
	r := d.run(t, "", "delete", "web", "--uid", old)
	if r.code == 0 || !strings.Contains(r.stderr, cur) {
		t.Fatalf("delete --uid of the old incarnation: exit %d, stderr %q; want a failure naming %s", r.code, r.stderr, cur)
	}
	r = d.run(t, "", "get", "web", "-o", "json")
	mustSucceed(t, "get after a refused delete", r)
	if !strings.Contains(r.stdout, cur) {
		t.Fatalf("get after a refused delete:\n%s", r.stdout)
	}
	mustSucceed(t, "delete --uid of the live incarnation", d.run(t, "", "delete", "web", "--uid", cur, "--grace-period", "0"))
}

// twoContainerPod is a pod of two containers, main and side, labelled
// tier: multi, each printing its name and the pod's, main then twelve
// numbered lines.
func twoContainerPod(name string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  labels: {tier: multi}\nspec:\n  containers:\n" +
		"  - name: main\n    image: " + testImage + "\n    command: [sh, -c, " +
		strconvQuote("echo "+name+"-main; echo 1; echo 2; echo 3; echo 4; echo 5; echo 6; echo 7; echo 8; echo 9; echo 10; echo 11; echo 12; sleep 1000") + "]\n" +
		"  - name: side\n    image: " + testImage + "\n    command: [sh, -c, " + strconvQuote("echo "+name+"-side; sleep 1000") + "]\n"
}

// TestLogsSelector: logs -l prints the pods' default containers (said
// on stderr), the last 10 lines of each, --all-containers every
// container, --prefix kubectl's [pod/NAME/CONTAINER]; -f follows them
// side by side within --max-log-requests; pod/NAME names a pod.
func TestLogsSelector(t *testing.T) {
	d := startPodsyncd(t)
	for _, name := range []string{"alpha", "beta"} {
		m := writeManifest(t, name+".yaml", twoContainerPod(name))
		mustSucceed(t, "run "+name, d.run(t, "", "run", "-f", m))
	}
	tail := func(name string) string {
		return "[pod/" + name + "/main] 3\n[pod/" + name + "/main] 4\n[pod/" + name + "/main] 5\n[pod/" + name + "/main] 6\n[pod/" + name + "/main] 7\n" +
			"[pod/" + name + "/main] 8\n[pod/" + name + "/main] 9\n[pod/" + name + "/main] 10\n[pod/" + name + "/main] 11\n[pod/" + name + "/main] 12\n"
	}
	r := d.run(t, "", "logs", "-l", "tier=multi", "--prefix")
	mustSucceed(t, "logs -l --prefix", r)
	if want := tail("alpha") + tail("beta"); r.stdout != want {
		t.Errorf("logs -l tier=multi --prefix:\n%s\nwant:\n%s", r.stdout, want)
	}
	if want := "Defaulted container \"main\" out of: main, side\nDefaulted container \"main\" out of: main, side\n"; r.stderr != want {
		t.Errorf("logs -l stderr = %q, want %q", r.stderr, want)
	}

	r = d.run(t, "", "logs", "-l", "tier=multi", "--all-containers", "--prefix", "--tail", "1")
	mustSucceed(t, "logs -l --all-containers", r)
	if want := "[pod/alpha/main] 12\n[pod/alpha/side] alpha-side\n[pod/beta/main] 12\n[pod/beta/side] beta-side\n"; r.stdout != want || r.stderr != "" {
		t.Errorf("logs -l --all-containers --prefix --tail 1 = %+v, want stdout %q", r, want)
	}
	r = d.run(t, "", "logs", "pod/beta", "-c", "side")
	if r.code != 0 || r.stdout != "beta-side\n" {
		t.Errorf("logs pod/beta -c side = %+v", r)
	}
	r = d.run(t, "", "logs", "-l", "tier=none")
	if r.code != 0 || r.stdout != "" || r.stderr != "No resources found in default namespace.\n" {
		t.Errorf("logs -l of no pod = %+v", r)
	}
	r = d.run(t, "", "logs", "-f", "-l", "tier=multi", "--all-containers", "--max-log-requests", "3")
	if r.code != 1 || r.stderr != "error: you are attempting to follow 4 log streams, but maximum allowed concurrency is 3, use --max-log-requests to increase the limit\n" {
		t.Errorf("logs -f of 4 streams over --max-log-requests 3 = %+v", r)
	}

	out := &syncBuffer{}
	stop, wait := d.background(t, out, "logs", "-f", "-l", "tier=multi", "--all-containers", "--prefix", "--tail", "1", "--max-log-requests", "4")
	eventually(t, "logs -f -l follows every container", func() bool {
		s := out.String()
		return strings.Count(s, "\n") == 4 && strings.Contains(s, "[pod/alpha/side] alpha-side\n") && strings.Contains(s, "[pod/beta/main] 12\n")
	})
	var pod podsyncv1.Pod
	if err := protojson.Unmarshal([]byte(d.run(t, "", "get", "beta", "-o", "proto-json").stdout), &pod); err != nil {
		t.Fatal(err)
	}
	for _, cs := range pod.GetStatus().GetContainerStatuses() {
		if cs.GetName() == "side" {
			if err := d.rt.WriteLog(strings.TrimPrefix(cs.GetContainerId(), "containerd://"), "stdout", "later"); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, "logs -f -l prints a new line with its prefix", func() bool { return strings.Contains(out.String(), "[pod/beta/side] later\n") })
	stop()
	if code := wait(); code != 0 {
		t.Errorf("logs -f -l ended with %d, want 0 on interrupt", code)
	}
}

// TestDeleteShowsWaitAndNoWait: a deletion that takes a while (a 3 s
// preStop sleep) says on stderr which container it stops and how much of
// the grace period is left, stdout keeping kubectl's line; --wait=false
// returns while the node is still stopping the pod, which then goes.
func TestDeleteShowsWaitAndNoWait(t *testing.T) {
	d := startPodsyncd(t)
	slow := func(name string) string {
		return podManifest(name, "sleep 1000", "  terminationGracePeriodSeconds: 30\n") +
			"    lifecycle: {preStop: {sleep: {seconds: 3}}}\n"
	}
	for _, name := range []string{"slow", "later"} {
		mustSucceed(t, "run "+name, d.run(t, "", "run", "-f", writeManifest(t, name+".yaml", slow(name))))
	}

	r := d.run(t, "", "delete", "slow")
	mustSucceed(t, "delete slow", r)
	if r.stdout != "pod \"default/slow\" deleted\n" {
		t.Errorf("delete stdout = %q", r.stdout)
	}
	if lines := linesWith(r.stderr, `pod "default/slow": stopping container "app" (`, "of the 30s grace period left)"); len(lines) != 1 {
		t.Errorf("delete stderr = %q; want one line naming the container and the grace period left", r.stderr)
	}

	r = d.run(t, "", "delete", "later", "--wait=false")
	mustSucceed(t, "delete --wait=false", r)
	if r.stdout != "pod \"default/later\" deleted\n" || r.stderr != "" {
		t.Errorf("delete --wait=false = %+v", r)
	}
	var pod podsyncv1.Pod
	if err := protojson.Unmarshal([]byte(mustGet(t, d, "later")), &pod); err != nil {
		t.Fatal(err)
	}
	if pod.GetMetadata().GetDeletionTimestamp() == nil {
		t.Errorf("after delete --wait=false the pod is not being deleted: %v", pod.GetMetadata())
	}
	eventually(t, "the pod goes after delete --wait=false", func() bool {
		return d.run(t, "", "get", "later").code == 1
	})

	// delete --all stops the pods side by side, as kubectl has the API
	// server do: at one moment both are being deleted.
	for _, name := range []string{"one", "two"} {
		mustSucceed(t, "run "+name, d.run(t, "", "run", "-f", writeManifest(t, name+".yaml", slow(name))))
	}
	out := &syncBuffer{}
	_, wait := d.background(t, out, "delete", "--all")
	eventually(t, "both pods being deleted at once", func() bool {
		r := d.run(t, "", "get", "-o", "proto-json")
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list.Items) != 2 {
			return false
		}
		for _, raw := range list.Items {
			var p podsyncv1.Pod
			if protojson.Unmarshal(raw, &p) != nil || p.GetMetadata().GetDeletionTimestamp() == nil {
				return false
			}
		}
		return true
	})
	if code := wait(); code != 0 || out.String() != "pod \"default/one\" deleted\npod \"default/two\" deleted\n" {
		t.Errorf("delete --all = %d, %q", code, out.String())
	}
}

// mustGet is get NAME -o proto-json, which must succeed.
func mustGet(t *testing.T, d *podsyncd, name string) string {
	t.Helper()
	r := d.run(t, "", "get", name, "-o", "proto-json")
	mustSucceed(t, "get "+name, r)
	return r.stdout
}

// TestDeleteWaitNote: what delete says it waits for.
func TestDeleteWaitNote(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	grace := int64(30)
	running := &podsyncv1.ContainerState{Running: &podsyncv1.ContainerStateRunning{}}
	exited := &podsyncv1.ContainerState{Terminated: &podsyncv1.ContainerStateTerminated{}}
	pod := func(deadline time.Time, states ...*podsyncv1.ContainerState) *podsyncv1.Pod {
		p := &podsyncv1.Pod{Metadata: &podsyncv1.ObjectMeta{Namespace: "default", Name: "web"}, Status: &podsyncv1.PodStatus{}}
		if !deadline.IsZero() {
			p.Metadata.DeletionTimestamp = timestamppb.New(deadline)
			p.Metadata.DeletionGracePeriodSeconds = &grace
		}
		for i, st := range states {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, &podsyncv1.ContainerStatus{Name: []string{"app", "side"}[i], State: st})
		}
		p.Status.InitContainerStatuses = []*podsyncv1.ContainerStatus{{Name: "init", State: exited}}
		return p
	}
	for _, tc := range []struct {
		pod  *podsyncv1.Pod
		want waitNote
	}{
		{pod(now.Add(27*time.Second), running, exited), waitNote{`pod "default/web": stopping container "app"`, "27s of the 30s grace period left"}},
		{pod(now.Add(5*time.Second), running, running), waitNote{`pod "default/web": stopping containers "app", "side"`, "5s of the 30s grace period left"}},
		{pod(now.Add(-time.Second), running), waitNote{`pod "default/web": grace period over, killing container "app"`, ""}},
		{pod(now.Add(time.Second), exited, exited), waitNote{`pod "default/web": containers stopped, removing its sandbox and volumes`, ""}},
		{pod(time.Time{}, running), waitNote{`pod "default/web": stopping container "app"`, ""}},
	} {
		if got := deleteWait(tc.pod, now); got != tc.want {
			t.Errorf("deleteWait = %+v, want %+v", got, tc.want)
		}
	}
	// Off a terminal, a line each time what a pod's deletion waits for
	// changes.
	var b strings.Builder
	board := newDeleteBoard(&b, false)
	board.show("a", waitNote{"stopping a", "3s left"})
	board.show("b", waitNote{"stopping b", "9s left"})
	board.show("a", waitNote{"stopping a", "2s left"})
	board.show("a", waitNote{"removing a", ""})
	board.done("a")
	board.end()
	if want := "stopping a (3s left)\nstopping b (9s left)\nremoving a\n"; b.String() != want {
		t.Errorf("progress off a terminal = %q, want %q", b.String(), want)
	}
	// On one, a line rewritten, cleared while a result is printed and at
	// the end.
	b.Reset()
	board = newDeleteBoard(&b, true)
	board.show("a", waitNote{"stopping a", "3s left"})
	board.show("b", waitNote{"stopping b", "9s left"})
	board.show("a", waitNote{"stopping a", "2s left"})
	board.done("a")
	if err := board.print(func() error { b.WriteString("pod a deleted\n"); return nil }); err != nil {
		t.Fatal(err)
	}
	board.end()
	want := "\r\x1b[Kstopping a (3s left)\r\x1b[Kstopping a (3s left) — and 1 more\r\x1b[Kstopping a (2s left) — and 1 more" +
		"\r\x1b[Kstopping b (9s left)\r\x1b[Kpod a deleted\n\r\x1b[Kstopping b (9s left)\r\x1b[K"
	if b.String() != want {
		t.Errorf("progress on a terminal = %q, want %q", b.String(), want)
	}
}
