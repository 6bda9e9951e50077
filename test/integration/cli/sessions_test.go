//go:build integration

package cli_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLogsSelector: a user reads the logs of every pod a label selects,
// with kubectl's prefixes, follows them side by side and ends with ^C;
// more streams than --max-log-requests are refused before any is opened.
func TestLogsSelector(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	tmp := t.TempDir()
	for _, name := range []string{"files", "more"} {
		f := filepath.Join(tmp, name+".yaml")
		if err := os.WriteFile(f, []byte(strings.Replace(twoContainers, "name: files,", "name: "+name+",", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		d.mustCtl(ctx, "run", "--wait-for", "running", "--timeout", "2m", "-f", f)
	}

	r := d.ctl(ctx, "", "logs", "-l", "app=files", "--all-containers", "--prefix")
	want := "[pod/files/app] app started\n[pod/files/side] side started\n[pod/more/app] app started\n[pod/more/side] side started\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("logs -l app=files --all-containers --prefix = %+v; want stdout %q", r, want)
	}
	r = d.ctl(ctx, "", "logs", "-l", "app=files")
	if r.code != 0 || r.stdout != "app started\napp started\n" || strings.Count(r.stderr, `Defaulted container "app" out of: app, side`) != 2 {
		t.Errorf("logs -l app=files = %+v; want each pod's default container, said on stderr", r)
	}
	r = d.ctl(ctx, "", "logs", "-f", "-l", "app=files", "--all-containers", "--max-log-requests", "2")
	if r.code != 1 || r.stderr != "error: you are attempting to follow 4 log streams, but maximum allowed concurrency is 2, use --max-log-requests to increase the limit\n" {
		t.Errorf("logs -f of 4 streams over --max-log-requests 2 = %+v", r)
	}

	// Follow both pods' app containers, then write to one.
	cmd := exec.CommandContext(ctx, podsyncctlBin, "logs", "-f", "-l", "app=files", "--prefix", "pod/files")
	cmd.Env = append(os.Environ(), "PODSYNC_ADDRESS="+d.address, "GORACE=atexit_sleep_ms=0")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "give a pod or -l, not both") {
		t.Errorf("logs -l with a pod: %v, %s", err, out)
	}
	cmd = exec.CommandContext(ctx, podsyncctlBin, "logs", "-f", "-l", "app=files", "--prefix")
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
	seen := map[string]bool{}
	wrote := false
	for !seen["[pod/more/app] hello from more"] {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("logs -f -l ended after %v: %s", seen, stderr.String())
			}
			seen[l] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("logs -f -l: no line for 20 s after %v", seen)
		}
		if !wrote && seen["[pod/files/app] app started"] && seen["[pod/more/app] app started"] {
			d.mustCtl(ctx, "exec", "more", "-c", "app", "--", "sh", "-c", "echo hello from more > /proc/1/fd/1")
			wrote = true
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("logs -f -l after SIGINT: %v, want exit 0: %s", err, stderr.String())
	}
}

// TestDeleteFeedback: deleting a pod whose container ignores SIGTERM
// says, while it waits, which container it stops and how much of the
// grace period is left, then kubectl's line; delete --wait=false
// returns at once and the node stops the pod on its own.
func TestDeleteFeedback(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	stubborn := func(name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  terminationGracePeriodSeconds: 8\n  containers:\n" +
			"  - name: app\n    image: registry.local/busybox:local\n    command: [sh, -c, \"trap '' TERM; while true; do sleep 1; done\"]\n"
	}
	for _, name := range []string{"stubborn", "later"} {
		if r := d.ctl(ctx, stubborn(name), "run", "--wait-for", "running", "--timeout", "2m", "-f", "-"); r.code != 0 {
			t.Fatalf("run %s: %+v", name, r)
		}
	}

	r := d.ctl(ctx, "", "delete", "stubborn")
	if r.code != 0 || r.stdout != "pod \"default/stubborn\" deleted\n" {
		t.Errorf("delete stubborn = %+v", r)
	}
	if lines := linesWithAll(r.stderr, `pod "default/stubborn": stopping container "app" (`, "of the 8s grace period left)"); len(lines) != 1 {
		t.Errorf("delete stderr = %q; want one line naming the container and the grace period left", r.stderr)
	}

	uid := d.pod(ctx, "later").GetMetadata().GetUid()
	r = d.ctl(ctx, "", "delete", "later", "--wait=false")
	if r.code != 0 || r.stdout != "pod \"default/later\" deleted\n" || r.stderr != "" {
		t.Errorf("delete --wait=false = %+v", r)
	}
	p := d.pod(ctx, "later")
	if p.GetMetadata().GetDeletionTimestamp() == nil || p.GetMetadata().GetUid() != uid {
		t.Errorf("after delete --wait=false: %v; want the pod being deleted", p.GetMetadata())
	}
	eventually(ctx, t, "the pod is gone after its grace period", func() bool { return d.ctl(ctx, "", "get", "later").code == 1 })
	if ids := sandboxes(ctx, t, uid); len(ids) > 0 {
		t.Errorf("sandboxes left after delete --wait=false: %v", ids)
	}
	if err := removePodCgroups(uid); err != nil {
		t.Error(err)
	}
}

// linesWithAll returns the lines of s that contain every word.
func linesWithAll(s string, words ...string) []string {
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
