package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func TestConvertSyncRequestGolden(t *testing.T) {
	code, out, errOut := run(t, "", "convert", "--request", "sync", "-f", "../../testdata/manifests/volumes.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden(t, "convert-volumes-sync.json", out)
}

func TestConvertRunRequestFromDirectory(t *testing.T) {
	code, out, errOut := run(t, "", "convert", "-f", "../../testdata/manifests")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var req podsyncv1.RunPodsRequest
	if err := protojson.Unmarshal([]byte(out), &req); err != nil {
		t.Fatalf("output is not a RunPodsRequest: %v", err)
	}
	files, _ := filepath.Glob("../../testdata/manifests/*.yaml")
	if len(req.Pods) < len(files) {
		t.Errorf("got %d pods from %d files, want at least one per file", len(req.Pods), len(files))
	}
	if len(req.ConfigMaps) == 0 || len(req.Secrets) == 0 {
		t.Errorf("got %d ConfigMaps and %d Secrets, want the volumes manifest's", len(req.ConfigMaps), len(req.Secrets))
	}
}

func TestConvertReadsStdin(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: registry.local/busybox:1.37}]\n"
	code, out, errOut := run(t, pod, "convert", "--request", "plan", "-f", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var req podsyncv1.PlanPodRequest
	if err := protojson.Unmarshal([]byte(out), &req); err != nil {
		t.Fatal(err)
	}
	if got := req.GetPod().GetSpec().GetRestartPolicy(); got != "Always" {
		t.Errorf("restartPolicy = %q, want the default Always", got)
	}
	if req.GetPod().GetMetadata().GetUid() == "" {
		t.Error("uid was not derived")
	}
}

func TestConvertErrors(t *testing.T) {
	tests := []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unsupported field names its path", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  nodeSelector: {disk: ssd}\n  containers: [{name: c, image: i}]\n",
			[]string{"convert", "-f", "-"}, 1, `Pod "a": spec.nodeSelector: Forbidden: not supported by podsync`},
		{"unknown field", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containerz: []\n",
			[]string{"convert", "-f", "-"}, 1, "containerz"},
		{"sync takes one pod", "", []string{"convert", "--request", "sync", "-f", "../../testdata/manifests/multi-container.yaml", "-f", "../../testdata/manifests/job.yaml"}, 1, "exactly one Pod"},
		{"no manifests", "", []string{"convert"}, 2, "at least one -f"},
		{"bad request kind", "", []string{"convert", "--request", "delete", "-f", "../../testdata/manifests/job.yaml"}, 2, "--request must be"},
		{"missing file", "", []string{"convert", "-f", "does-not-exist.yaml"}, 1, "does-not-exist.yaml"},
		{"unknown flag", "", []string{"convert", "--frobnicate"}, 2, "unknown flag"},
		{"unknown command", "", []string{"frobnicate"}, 2, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, tt.stdin, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tt.wantCode, errOut)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing on error", out)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantErr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, "", "version")
	if code != 0 || !strings.HasPrefix(out, "podsyncctl ") {
		t.Errorf("version: exit %d, output %q", code, out)
	}
}
