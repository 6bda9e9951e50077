//go:build integration

package cli_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// examples copies examples/ into a temporary directory with the web
// example's host port 8080 replaced by a port claimed for the instance,
// so that the test does not collide with make run or another test.
func examples(ctx context.Context, t *testing.T) (dir string, hostPort int) {
	t.Helper()
	hostPort, err := inst.HostPort(ctx)
	if err != nil {
		t.Fatalf("HostPort: %v", err)
	}
	dir = t.TempDir()
	entries, err := os.ReadDir(filepath.Join(repo, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(repo, "examples", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "hostPort: 8080", "hostPort: "+strconv.Itoa(hostPort))
		if err := os.WriteFile(filepath.Join(dir, e.Name()), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, hostPort
}

// TestExamples runs the examples as make run does: the long-running ones
// until Ready, the job until Succeeded, the crash loop with sync; then
// checks the tables, the plan, the logs and the host port, and that
// delete -f leaves no sandbox in the runtime.
func TestExamples(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	dir, port := examples(ctx, t)
	f := func(name string) string { return filepath.Join(dir, name) }

	out := d.mustCtl(ctx, "run", "--wait-for", "ready", "--timeout", "2m", "-f", f("web.yaml"), "-f", f("init-sidecar.yaml"), "-f", f("config.yaml"))
	for _, row := range [][]string{
		{"default", "web", "Running", "1/1", "0", "OK"},
		{"default", "init-sidecar", "Running", "2/2", "0", "OK"},
		{"default", "config", "Running", "1/1", "0", "OK"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("run summary has no row %q:\n%s", row, out)
		}
	}
	if !strings.Contains(out, "3 of 3 pods reached Ready") {
		t.Errorf("run output:\n%s", out)
	}
	out = d.mustCtl(ctx, "run", "--wait-for", "succeeded", "--timeout", "2m", "-f", f("job.yaml"))
	if !hasRow(out, "default", "job", "Succeeded", "0/1", "0", "OK") {
		t.Errorf("run job:\n%s", out)
	}
	out = d.mustCtl(ctx, "sync", "-f", f("crashloop.yaml"))
	if !strings.Contains(out, "start container app") || !strings.Contains(out, "pod default/crashloop created") {
		t.Errorf("sync crashloop:\n%s", out)
	}
	eventually(ctx, t, "crashloop in CrashLoopBackOff", func() bool {
		r := d.ctl(ctx, "", "get", "crashloop")
		return hasRow(r.stdout, "default", "crashloop", "0/1", "CrashLoopBackOff")
	})
	out = d.mustCtl(ctx, "plan", "-f", f("crashloop.yaml"))
	if !strings.Contains(out, "! container app waits: CrashLoopBackOff (retry in ") {
		t.Errorf("plan of the crash loop:\n%s", out)
	}
	if out := d.mustCtl(ctx, "logs", "crashloop", "--previous"); !strings.Contains(out, "something went wrong") {
		t.Errorf("logs --previous:\n%s", out)
	}
	if out := d.mustCtl(ctx, "logs", "job"); out != "the sum of 1..100 is 5050\n" {
		t.Errorf("logs job = %q", out)
	}
	if out := d.mustCtl(ctx, "logs", "config"); !strings.Contains(out, "GREETING=hello LOG_LEVEL=debug user=demo") {
		t.Errorf("logs config:\n%s", out)
	}

	// The web example through its host port.
	res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		t.Errorf("GET through the host port: %v", err)
	} else {
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if !strings.Contains(string(body), "Hello from podsync") {
			t.Errorf("GET through the host port: %s %q", res.Status, body)
		}
	}

	out = d.mustCtl(ctx, "ls", "-o", "wide")
	for _, row := range [][]string{
		{"default", "config", "1/1", "Running", "0"},
		{"default", "init-sidecar", "2/2", "Running", "0"},
		{"default", "job", "0/1", "Completed", "0"},
		{"default", "web", "1/1", "Running", "0"},
		{"default", "crashloop", "0/1", "CrashLoopBackOff"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("ls has no row %q:\n%s", row, out)
		}
	}

	web := d.pod(ctx, "web")
	if len(sandboxes(ctx, t, web.GetMetadata().GetUid())) == 0 {
		t.Fatal("the web pod has no sandbox in the runtime")
	}
	var uids []string
	for _, p := range decodeList(t, d.mustCtl(ctx, "get", "-o", "proto-json")) {
		uids = append(uids, p.GetMetadata().GetUid())
	}
	out = d.mustCtl(ctx, "delete", "-f", dir)
	if strings.Count(out, " deleted\n") != 5 {
		t.Errorf("delete -f:\n%s", out)
	}
	for _, uid := range uids {
		if ids := sandboxes(ctx, t, uid); len(ids) > 0 {
			t.Errorf("pod %s: sandboxes left in the runtime after delete: %v", uid, ids)
		}
	}
	if r := d.ctl(ctx, "", "get"); r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "No resources found") {
		t.Errorf("get after delete: %+v", r)
	}
}

// TestBadManifests: a manifest podsyncctl or podsyncd refuses exits 1 with
// a readable reason naming the file or the field, and runs nothing.
func TestBadManifests(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := write("unknown.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: typo}\nspec:\n  containers:\n"+
		"  - name: app\n    image: registry.local/busybox:local\n    imagePullPolicyy: Never\n")
	badImage := write("bad-image.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: bad-image}\nspec:\n  containers:\n"+
		"  - name: app\n    image: registry.local/BusyBox:local\n")
	unsupported := write("unsupported.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: gated}\nspec:\n  readinessGates: [{conditionType: x}]\n"+
		"  containers:\n  - name: app\n    image: registry.local/busybox:local\n")
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{"unknown field", []string{"run", "-f", unknown}, 1,
			[]string{"error: the manifests have 1 problem:\n", "  " + unknown + `:8: Pod/typo: spec.containers[0].imagePullPolicyy: unknown field; did you mean imagePullPolicy?`}},
		{"field podsync does not support", []string{"run", "-f", unsupported}, 1,
			[]string{"  " + unsupported + ":5: Pod/gated: spec.readinessGates: readiness gates are set by controllers podsync does not run; remove them"}},
		// podsyncctl checks what podsyncd would, before it sends.
		{"invalid image reference", []string{"run", "-f", badImage}, 1,
			[]string{"  " + badImage + `:7: Pod/bad-image: spec.containers[0].image: "registry.local/BusyBox:local" is not valid`}},
		{"invalid image reference in sync", []string{"sync", "-f", badImage}, 1,
			[]string{"  " + badImage + `:7: Pod/bad-image: spec.containers[0].image: "registry.local/BusyBox:local" is not valid`}},
		{"usage", []string{"run", "--wait-for", "forever", "-f", badImage}, 2, []string{"error: --wait-for"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := d.ctl(ctx, "", tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit %d, want %d: %+v", r.code, tt.wantCode, r)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
				}
			}
		})
	}
	if r := d.ctl(ctx, "", "get"); r.stdout != "" {
		t.Errorf("pods were created:\n%s", r.stdout)
	}
}

// TestKubectlDump: a `kubectl get pod -o yaml` dump — resourceVersion,
// managedFields, status, the injected kube-api-access volume and the
// service account — runs to Ready on the runtime, with its notices.
func TestKubectlDump(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	dump := filepath.Join(repo, "internal", "cli", "testdata", "input", "kubectl-dump.yaml")
	r := d.ctl(ctx, "", "run", "--wait-for", "ready", "--timeout", "2m", "-f", dump)
	if r.code != 0 || !strings.Contains(r.stdout, "1 of 1 pods reached Ready") {
		t.Fatalf("run the dump: %+v", r)
	}
	if !strings.Contains(r.stderr, "notice: "+dump+":1: Pod/web: dropped what the API server fills in: metadata.resourceVersion") ||
		!strings.Contains(r.stderr, "no service account token is mounted") {
		t.Errorf("notices:\n%s", r.stderr)
	}
	d.mustCtl(ctx, "delete", "-f", dump)
}

// TestKubeadmStaticPod: a kubeadm static pod (system-node-critical,
// hostNetwork, a DirectoryOrCreate hostPath, seccomp RuntimeDefault,
// startup and liveness probes of 127.0.0.1) runs to Ready on a podsyncd at
// the privileged level, kubeadm's kube-system's.
func TestKubeadmStaticPod(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncdArgs(t, "--pod-security=privileged")
	data, err := os.ReadFile(filepath.Join(repo, "internal", "cli", "testdata", "input", "kubeadm-static-pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The hostPath in the test's directory, not the host's /var/lib.
	dir := t.TempDir()
	manifest := filepath.Join(dir, "etcd.yaml")
	if err := os.WriteFile(manifest, []byte(strings.ReplaceAll(string(data), "/var/lib/etcd", filepath.Join(dir, "etcd"))), 0o644); err != nil {
		t.Fatal(err)
	}
	r := d.ctl(ctx, "", "run", "--wait-for", "ready", "--timeout", "2m", "-f", manifest)
	if r.code != 0 || !strings.Contains(r.stdout, "1 of 1 pods reached Ready") {
		t.Fatalf("run the static pod: %+v", r)
	}
	if fi, err := os.Stat(filepath.Join(dir, "etcd")); err != nil || !fi.IsDir() {
		t.Errorf("the DirectoryOrCreate hostPath was not created: %v", err)
	}
	d.mustCtl(ctx, "delete", "-f", manifest)
}

// TestLogsFollow: logs -f streams the lines a pod writes, one per 100 ms,
// as they come, and ends with exit 0 on SIGINT; delete then removes the
// pod from the runtime.
func TestLogsFollow(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	ticker := "apiVersion: v1\nkind: Pod\nmetadata: {name: ticker}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n" +
		"  - name: tick\n    image: registry.local/busybox:local\n    command: [sh, -c]\n" +
		"    args: [\"trap 'exit 0' TERM; i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.1 & wait; done\"]\n"
	if r := d.ctl(ctx, ticker, "run", "-f", "-"); r.code != 0 {
		t.Fatalf("run: %+v", r)
	}

	cmd := exec.CommandContext(ctx, podsyncctlBin, "logs", "-f", "--tail", "1", "ticker")
	cmd.Env = append(os.Environ(), "PODSYNC_ADDRESS="+d.address, "GORACE=atexit_sleep_ms=0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var got []int
	start := time.Now()
	for len(got) < 10 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("logs -f ended after %v: %s", got, stderr.String())
			}
			n, err := strconv.Atoi(strings.TrimPrefix(l, "tick "))
			if err != nil {
				t.Fatalf("line %q", l)
			}
			got = append(got, n)
		case <-time.After(10 * time.Second):
			t.Fatalf("logs -f: no line for 10 s after %v", got)
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			t.Errorf("lines out of order or missing: %v", got)
			break
		}
	}
	// Ten lines written 100 ms apart arrive as they are written, not at
	// once at the end.
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Errorf("10 lines in %s: not followed as written", took)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("logs -f after SIGINT: %v, want exit 0: %s", err, stderr.String())
	}

	uid := d.pod(ctx, "ticker").GetMetadata().GetUid()
	if out := d.mustCtl(ctx, "delete", "ticker"); out != "pod \"default/ticker\" deleted\n" {
		t.Errorf("delete: %q", out)
	}
	if ids := sandboxes(ctx, t, uid); len(ids) > 0 {
		t.Errorf("sandboxes left after delete: %v", ids)
	}
	if err := removePodCgroups(uid); err != nil {
		t.Error(err)
	}
}

// TestDeploymentAndNodeSelector: a Deployment of three replicas runs as
// three pods on containerd and delete -f of its file removes them; a pod
// whose nodeSelector names a label the node lacks is refused with
// NodeAffinity and leaves nothing in the runtime, and runs on a podsyncd
// started with that label.
func TestDeploymentAndNodeSelector(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	selective := filepath.Join(t.TempDir(), "gpu.yaml")
	if err := os.WriteFile(selective, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: gpu}\nspec:\n"+
		"  nodeSelector: {gpu: \"true\", kubernetes.io/os: linux}\n  containers:\n  - name: app\n    image: registry.local/busybox:local\n"+
		"    command: [sh, -c, 'trap \"exit 0\" TERM; sleep 3600 & wait']\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("without the label", func(t *testing.T) {
		d := startPodsyncdArgs(t)
		out := d.mustCtl(ctx, "run", "-f", "testdata/workloads/deployment.yaml")
		if !strings.Contains(out, "3 of 3 pods reached Running") {
			t.Errorf("run of the Deployment:\n%s", out)
		}
		var uids []string
		for _, p := range decodeList(t, d.mustCtl(ctx, "get", "-l", "podsync.io/workload-name=web", "-o", "proto-json")) {
			uids = append(uids, p.GetMetadata().GetUid())
			if len(sandboxes(ctx, t, p.GetMetadata().GetUid())) == 0 {
				t.Errorf("pod %s has no sandbox in the runtime", p.GetMetadata().GetName())
			}
		}
		if len(uids) != 3 {
			t.Fatalf("%d pods of the Deployment, want 3", len(uids))
		}
		out = d.mustCtl(ctx, "delete", "-f", "testdata/workloads/deployment.yaml", "--grace-period", "0")
		if strings.Count(out, " deleted\n") != 3 {
			t.Errorf("delete -f:\n%s", out)
		}
		for _, uid := range uids {
			if ids := sandboxes(ctx, t, uid); len(ids) > 0 {
				t.Errorf("pod %s: sandboxes left after delete -f: %v", uid, ids)
			}
		}
		r := d.ctl(ctx, "", "run", "-f", selective)
		if r.code != 1 || !strings.Contains(r.stdout, "Rejected (NodeAffinity): Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector") {
			t.Errorf("run of a pod selecting a label the node lacks: %+v", r)
		}
		if r := d.ctl(ctx, "", "get"); r.stdout != "" {
			t.Errorf("pods after the refusal:\n%s", r.stdout)
		}
	})
	t.Run("with the label", func(t *testing.T) {
		d := startPodsyncdArgs(t, "--node-labels=gpu=true")
		out := d.mustCtl(ctx, "run", "-f", selective)
		if !strings.Contains(out, "1 of 1 pods reached Running") {
			t.Errorf("run with the label:\n%s", out)
		}
		if out := d.mustCtl(ctx, "node"); !strings.Contains(out, "gpu=true") {
			t.Errorf("node does not show the label:\n%s", out)
		}
	})
}

// TestNamedVolumes: two pods naming the same claim share its data through
// podsyncd; deleting both keeps it, podsyncctl volume ls lists it and
// volume rm removes it (refused while a pod names it).
func TestNamedVolumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	d := startPodsyncd(t)
	pod := func(name, script string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n" +
			"  - name: app\n    image: registry.local/busybox:local\n    command: [sh, -c, '" + script + "']\n" +
			"    volumeMounts: [{name: data, mountPath: /data}]\n  volumes:\n  - name: data\n    persistentVolumeClaim: {claimName: shared}\n"
	}
	if r := d.ctl(ctx, pod("writer", `trap "exit 0" TERM; echo hello > /data/msg; sleep 3600 & wait`), "run", "-f", "-"); r.code != 0 {
		t.Fatalf("run writer: %+v", r)
	}
	if r := d.ctl(ctx, pod("reader", `trap "exit 0" TERM; until [ -f /data/msg ]; do sleep 0.1; done; cat /data/msg; sleep 3600 & wait`), "run", "-f", "-"); r.code != 0 {
		t.Fatalf("run reader: %+v", r)
	}
	eventually(ctx, t, "the reader prints the writer's file", func() bool {
		r := d.ctl(ctx, "", "logs", "reader")
		return r.code == 0 && strings.TrimSpace(r.stdout) == "hello"
	})
	if out := d.mustCtl(ctx, "volume", "ls"); !hasRow(out, "default", "shared", "default/reader,default/writer") {
		t.Errorf("volume ls with both pods:\n%s", out)
	}
	if r := d.ctl(ctx, "", "volume", "rm", "shared"); r.code != 1 || !strings.Contains(r.stderr, "VOLUME_IN_USE") {
		t.Errorf("volume rm in use: %+v", r)
	}
	d.mustCtl(ctx, "delete", "writer", "reader", "--grace-period", "0")
	out := d.mustCtl(ctx, "volume", "ls")
	if !hasRow(out, "default", "shared", "<none>") {
		t.Fatalf("volume ls after the pods were deleted:\n%s", out)
	}
	path := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1])[3]
	if data, err := os.ReadFile(filepath.Join(path, "msg")); err != nil || string(data) != "hello\n" {
		t.Errorf("the claim's data after the pods were deleted: %q, %v", data, err)
	}
	if out := d.mustCtl(ctx, "volume", "rm", "shared"); out != "volume \"shared\" removed\n" {
		t.Errorf("volume rm: %q", out)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after volume rm: %v", path, err)
	}
}
