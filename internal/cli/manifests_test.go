package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"

	"github.com/podsync/podsync/client"
)

// TestManifestProblemsGolden: every problem of every document of every
// -f file is reported before podsyncd is contacted, one line each as
// FILE:LINE: KIND/NAME: FIELD: problem, with exit code 1 — with no
// podsyncd to contact, so nothing was sent.
func TestManifestProblemsGolden(t *testing.T) {
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		// Three bad documents: duplicate container names, an upper-case
		// name and a missing image, a mount without a volume.
		{"problems-three-bad.txt", []string{"convert", "-f", "testdata/input/three-bad.yaml"}},
		{"problems-number-for-string.txt", []string{"run", "-f", "testdata/input/number-for-string.yaml"}},
		{"problems-misspelt.txt", []string{"sync", "-f", "testdata/input/misspelt.yaml"}},
		// A bad file does not hide the next.
		{"problems-two-files.txt", []string{"plan", "-f", "testdata/input/misspelt.yaml", "-f", "testdata/input/number-for-string.yaml"}},
		{"problems-identity.txt", []string{"convert", "-f", "testdata/input/generate-name.yaml"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			r := runCLI(t, map[string]string{"PODSYNC_ADDRESS": "unix://" + filepath.Join(t.TempDir(), "none.sock")}, "", tt.args...)
			if r.code != 1 || r.stdout != "" {
				t.Errorf("exit %d, stdout %q; want 1 and nothing", r.code, r.stdout)
			}
			golden(t, tt.golden, r.stderr)
		})
	}
}

// TestKubectlDump: a `kubectl get pod -o yaml` dump converts, with one
// notice for what the API server filled in and one for the service
// account, and runs.
func TestKubectlDump(t *testing.T) {
	r := runCLI(t, nil, "", "convert", "-f", "testdata/input/kubectl-dump.yaml")
	if r.code != 0 {
		t.Fatalf("convert: exit %d\n%s", r.code, r.stderr)
	}
	golden(t, "convert-kubectl-dump.json", r.stdout)
	golden(t, "convert-kubectl-dump-notices.txt", r.stderr)

	d := startPodsyncd(t)
	r = d.run(t, "", "run", "-f", "testdata/input/kubectl-dump.yaml")
	mustSucceed(t, "run", r)
	if !hasRow(r.stdout, "default", "web", "Running") {
		t.Errorf("run:\n%s", r.stdout)
	}
	if strings.Count(r.stderr, "notice: ") != 2 {
		t.Errorf("run's notices:\n%s", r.stderr)
	}
}

// TestViolationsWithoutJargon: podsyncd's field violations are printed
// without the API server's "Forbidden: "; the status keeps it.
func TestViolationsWithoutJargon(t *testing.T) {
	var out strings.Builder
	a := &app{stderr: &out}
	a.writeError(&client.Error{Code: codes.InvalidArgument, Violations: []*errdetails.BadRequest_FieldViolation{
		{Field: "pods[0].spec.containers[0].restartPolicy", Description: "Forbidden: may only be set on init containers"},
		{Field: "pods[0].spec.nodeName", Description: `Invalid value: "x": must be empty or this node's name "node-1"`},
	}})
	want := "error: invalid request:\n" +
		"  pods[0].spec.containers[0].restartPolicy: may only be set on init containers\n" +
		"  pods[0].spec.nodeName: Invalid value: \"x\": must be empty or this node's name \"node-1\"\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
