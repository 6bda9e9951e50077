package cli

import (
	"strings"
	"testing"
)

// TestDebug: podsyncctl debug adds an ephemeral container to a running
// pod, prints its output until it exits and exits with its code; the pod
// shows it in ephemeralContainerStatuses, terminated and not restarted; a
// second one of the same name and an unknown target are refused with the
// field named, and --image is required.
func TestDebug(t *testing.T) {
	d := startPodsyncd(t)
	// web's readiness probe never passes on the fake runtime.
	mustSucceed(t, "run", d.run(t, "", "run", "--min-ready-seconds", "0", "-f", "../../examples/web.yaml"))

	r := d.run(t, "", "debug", "web", "--image", testImage, "--target", "httpd", "-c", "dbg", "--", "sh", "-c", "echo hi; exit 3")
	if r.code != 3 || r.stdout != "hi\n" {
		t.Fatalf("debug: exit %d, stdout %q, stderr %q; want exit 3 and hi", r.code, r.stdout, r.stderr)
	}
	r = d.run(t, "", "get", "pod", "web", "-o", "yaml")
	mustSucceed(t, "get -o yaml", r)
	for _, want := range []string{"ephemeralContainers:", "targetContainerName: httpd", "ephemeralContainerStatuses:", "exitCode: 3"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get -o yaml lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "restartCount: 1") {
		t.Errorf("the debug container was restarted:\n%s", r.stdout)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"duplicate name", []string{"debug", "web", "--image", testImage, "-c", "dbg", "--", "true"}, 1, "ephemeralContainers[1].name"},
		{"name of a container", []string{"debug", "web", "--image", testImage, "-c", "httpd", "--", "true"}, 1, "ephemeralContainers[1].name"},
		{"unknown target", []string{"debug", "web", "--image", testImage, "-c", "dbg2", "--target", "db", "--", "true"}, 1, "targetContainerName"},
		{"unknown pod", []string{"debug", "nope", "--image", testImage, "--", "true"}, 1, "nope"},
		{"no image", []string{"debug", "web", "--", "true"}, 2, "--image"},
	} {
		r := d.run(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d naming %q", tc.name, r.code, r.stderr, tc.code, tc.want)
		}
	}
}
