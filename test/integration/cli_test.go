//go:build integration

package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// TestLocalcriCommand runs `localcri up`, uses the printed crictl command
// line, and checks that `localcri down` leaves nothing tagged with the run id
// (its directory, bridge or CNI network name) in ps, mount, ip link or
// ip netns.
func TestLocalcriCommand(t *testing.T) {
	ctx := testContext(t)
	repo, err := localcri.RepoDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "localcri")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./hack/localcri")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build localcri: %v: %s", err, out)
	}
	stateDir := t.TempDir()
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, append(args, "--state-dir", stateDir)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	downDone := false
	t.Cleanup(func() {
		if !downDone {
			cmd := exec.CommandContext(context.Background(), bin, "down", "--state-dir", stateDir)
			cmd.Dir = repo
			_ = cmd.Run()
		}
	})

	out, err := run("up")
	if err != nil {
		t.Fatalf("localcri up: %v\n%s", err, out)
	}
	endpoint := regexp.MustCompile(`(?m)^CRI endpoint: (unix://\S+)$`).FindStringSubmatch(out)
	crictl := regexp.MustCompile(`(?m)^crictl: +(.+)$`).FindStringSubmatch(out)
	runID := regexp.MustCompile(`(?m)^run id: +(\S+)$`).FindStringSubmatch(out)
	if endpoint == nil || crictl == nil || runID == nil {
		t.Fatalf("localcri up printed no endpoint, crictl line or run id:\n%s", out)
	}
	id := runID[1]

	// A second up reuses the running instance.
	if again, err := run("up"); err != nil || !strings.Contains(again, endpoint[1]) {
		t.Errorf("second localcri up: %v\n%s", err, again)
	}

	args := strings.Fields(crictl[1])
	images, err := exec.CommandContext(ctx, args[0], append(args[1:], "images")...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s images: %v\n%s", crictl[1], err, images)
	}
	for _, repo := range []string{"registry.local/pause", "registry.local/busybox"} {
		if !strings.Contains(string(images), repo) {
			t.Errorf("crictl images lacks %s:\n%s", repo, images)
		}
	}
	if st, err := run("status"); err != nil || !strings.Contains(st, "status:       running") {
		t.Errorf("localcri status: %v\n%s", err, st)
	}

	out, err = run("down")
	downDone = true
	if err != nil || !strings.Contains(out, "stopped run "+id) {
		t.Fatalf("localcri down: %v\n%s", err, out)
	}
	if st, err := run("status"); err != nil || !strings.Contains(st, "not running") {
		t.Errorf("localcri status after down: %v\n%s", err, st)
	}
	for _, oracle := range [][]string{{"ps", "-eo", "args"}, {"mount"}, {"ip", "link"}, {"ip", "netns"}} {
		o, err := exec.CommandContext(ctx, oracle[0], oracle[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(oracle, " "), err, o)
		}
		for _, line := range strings.Split(string(o), "\n") {
			for _, tag := range []string{"/run/localcri/" + id, "lcri-" + id, "localcri-" + id} {
				if strings.Contains(line, tag) {
					t.Errorf("%s still shows run %s: %s", strings.Join(oracle, " "), id, line)
				}
			}
		}
	}
}
