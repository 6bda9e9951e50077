//go:build integration

package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// twoContainers is a pod of two idle busybox containers, app and side.
const twoContainers = `apiVersion: v1
kind: Pod
metadata: {name: files, labels: {app: files}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: registry.local/busybox:local
    command: ["sh", "-c", "trap 'exit 0' TERM; echo app started; while true; do sleep 1; done"]
  - name: side
    image: registry.local/busybox:local
    command: ["sh", "-c", "trap 'exit 0' TERM; echo side started; while true; do sleep 1; done"]
`

// TestCp: a user copies a directory into a container, a file and the
// directory back out, into the container -c names, and meets kubectl's
// messages and exit codes for a missing file on either side.
func TestCp(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	tmp := t.TempDir()
	manifest := filepath.Join(tmp, "files.yaml")
	if err := os.WriteFile(manifest, []byte(twoContainers), 0o644); err != nil {
		t.Fatal(err)
	}
	d.mustCtl(ctx, "run", "--wait-for", "running", "--timeout", "2m", "-f", manifest)

	site := filepath.Join(tmp, "site")
	for name, body := range map[string]string{"index.html": "<h1>hello</h1>\n", "css/main.css": "body{}\n"} {
		p := filepath.Join(site, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}

	// Into a directory of the default container: the tree lands under
	// its base name, and kubectl's notice names the container chosen.
	r := d.ctl(ctx, "", "cp", site, "files:/tmp")
	if r.code != 0 || !strings.Contains(r.stderr, `Defaulted container "app" out of: app, side`) {
		t.Fatalf("cp site files:/tmp = %+v; want exit 0 and the defaulted container", r)
	}
	if out := d.mustCtl(ctx, "exec", "files", "-c", "app", "--", "cat", "/tmp/site/index.html", "/tmp/site/css/main.css"); out != "<h1>hello</h1>\nbody{}\n" {
		t.Errorf("the copied files read %q", out)
	}
	if out := d.mustCtl(ctx, "exec", "files", "-c", "app", "--", "stat", "-c", "%a", "/tmp/site/index.html"); strings.TrimSpace(out) != "640" {
		t.Errorf("the copied file's mode is %q, want 640 (kept)", out)
	}

	// To a new name in the container -c names.
	if r := d.ctl(ctx, "", "cp", filepath.Join(site, "index.html"), "files:/tmp/page.html", "-c", "side"); r.code != 0 || r.stderr != "" {
		t.Errorf("cp index.html files:/tmp/page.html -c side = %+v", r)
	}
	if out := d.mustCtl(ctx, "exec", "files", "-c", "side", "--", "cat", "/tmp/page.html"); out != "<h1>hello</h1>\n" {
		t.Errorf("side's /tmp/page.html reads %q", out)
	}

	// Back out: a file, and the directory as a new local directory.
	page := filepath.Join(tmp, "page.html")
	if r := d.ctl(ctx, "", "cp", "default/files:/tmp/page.html", page, "-c", "side"); r.code != 0 {
		t.Errorf("cp default/files:/tmp/page.html = %+v", r)
	}
	if b, err := os.ReadFile(page); err != nil || string(b) != "<h1>hello</h1>\n" {
		t.Errorf("copied page.html = %q, %v", b, err)
	}
	back := filepath.Join(tmp, "back")
	if r := d.ctl(ctx, "", "cp", "files:/tmp/site/", back, "-c", "app"); r.code != 0 {
		t.Errorf("cp files:/tmp/site/ back = %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(back, "css", "main.css")); err != nil || string(b) != "body{}\n" {
		t.Errorf("copied css/main.css = %q, %v", b, err)
	}

	// A file the container does not have: tar's message, kubectl's
	// "command terminated with exit code N" and N as the exit code.
	r = d.ctl(ctx, "", "cp", "files:/nonexistent", filepath.Join(tmp, "x"), "-c", "app")
	if r.code == 0 || !strings.Contains(r.stderr, "/nonexistent") ||
		!strings.Contains(r.stderr, "error: command terminated with exit code ") {
		t.Errorf("cp of a missing remote file = %+v; want tar's message and its exit code", r)
	}
	// One the local filesystem does not have.
	r = d.ctl(ctx, "", "cp", filepath.Join(tmp, "nope"), "files:/tmp")
	if r.code != 1 || r.stderr != "error: "+filepath.Join(tmp, "nope")+" doesn't exist in local filesystem\n" {
		t.Errorf("cp of a missing local file = %+v", r)
	}
	// A pod that does not exist.
	r = d.ctl(ctx, "", "cp", page, "nosuch:/tmp")
	if r.code != 1 || !strings.Contains(r.stderr, "nosuch") {
		t.Errorf("cp to a missing pod = %+v; want exit 1 naming it", r)
	}
}
