package cli

import (
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

// golden compares got with testdata/name, or rewrites it with -update.
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
	r := runCLI(t, nil, "", "convert", "--request", "sync", "-f", "../../testdata/manifests/volumes.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	golden(t, "convert-volumes-sync.json", r.stdout)
}

func TestConvertRunRequestFromDirectory(t *testing.T) {
	r := runCLI(t, nil, "", "convert", "-f", "../../testdata/manifests")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var req podsyncv1.RunPodsRequest
	if err := protojson.Unmarshal([]byte(r.stdout), &req); err != nil {
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

// TestConvertExamples: every example converts, so that make run and the
// README's commands start from valid manifests.
func TestConvertExamples(t *testing.T) {
	r := runCLI(t, nil, "", "convert", "-f", "../../examples")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var req podsyncv1.RunPodsRequest
	if err := protojson.Unmarshal([]byte(r.stdout), &req); err != nil {
		t.Fatal(err)
	}
	for _, p := range req.GetPods() {
		for _, c := range append(p.GetSpec().GetInitContainers(), p.GetSpec().GetContainers()...) {
			if c.GetImage() != testImage {
				t.Errorf("pod %s container %s: image %q, want %q (the only image there is)", p.GetMetadata().GetName(), c.GetName(), c.GetImage(), testImage)
			}
		}
	}
}

func TestConvertReadsStdin(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: registry.local/busybox:1.37}]\n"
	r := runCLI(t, nil, pod, "convert", "--request", "plan", "-f", "-")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var req podsyncv1.PlanPodRequest
	if err := protojson.Unmarshal([]byte(r.stdout), &req); err != nil {
		t.Fatal(err)
	}
	if got := req.GetPod().GetSpec().GetRestartPolicy(); got != "Always" {
		t.Errorf("restartPolicy = %q, want the default Always", got)
	}
	if req.GetPod().GetMetadata().GetUid() == "" {
		t.Error("uid was not derived")
	}
}

// TestCommandErrors: errors found before podsyncd is contacted, with their
// exit codes (1 for a bad manifest, 2 for a bad command line) and
// messages naming the file and the field.
func TestCommandErrors(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown.yaml")
	if err := os.WriteFile(unknown, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: c\n    image: i\n    imagePullPolicyy: Always\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unsupported := filepath.Join(dir, "unsupported.yaml")
	if err := os.WriteFile(unsupported, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  readinessGates: [{conditionType: x}]\n  containers: [{name: c, image: i}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	tests := []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unsupported field names file and path", "", []string{"run", "-f", unsupported}, 1,
			unsupported + `:5: Pod/a: spec.readinessGates: readiness gates are set by controllers podsync does not run; remove them`},
		{"unknown field names file and path", "", []string{"run", "-f", unknown}, 1,
			unknown + `:8: Pod/a: spec.containers[0].imagePullPolicyy: unknown field; did you mean imagePullPolicy?`},
		{"unknown field on stdin", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containerz: []\n",
			[]string{"convert", "-f", "-"}, 1, `stdin:5: Pod/a: spec.containerz: unknown field; did you mean containers?`},
		{"sync takes one pod", "", []string{"sync", "-f", "../../testdata/manifests/multi-container.yaml", "-f", "../../testdata/manifests/job.yaml"}, 1, "exactly one Pod"},
		{"convert sync takes one pod", "", []string{"convert", "--request", "sync", "-f", "../../testdata/manifests/multi-container.yaml", "-f", "../../testdata/manifests/job.yaml"}, 1, "exactly one Pod"},
		{"directory without manifests", "", []string{"run", "-f", empty}, 1, "holds no .yaml"},
		{"no manifests", "", []string{"run"}, 2, "at least one -f"},
		{"no manifests for convert", "", []string{"convert"}, 2, "at least one -f"},
		{"bad wait-for", "", []string{"run", "-f", "x", "--wait-for", "done"}, 2, "--wait-for"},
		{"bad output", "", []string{"get", "-o", "xml"}, 2, `-o "xml": want wide, json, yaml`},
		{"bad request kind", "", []string{"convert", "--request", "delete", "-f", "../../testdata/manifests/job.yaml"}, 2, "--request must be"},
		{"missing file", "", []string{"convert", "-f", "does-not-exist.yaml"}, 1, "does-not-exist.yaml"},
		{"unknown flag", "", []string{"convert", "--frobnicate"}, 2, "unknown flag"},
		{"unknown command", "", []string{"frobnicate"}, 2, "unknown command"},
		{"logs needs a pod", "", []string{"logs"}, 2, "logs needs a pod (POD or pod/POD) or a selector (-l)"},
		{"logs of a pod or a selector", "", []string{"logs", "web", "-l", "app=web"}, 2, "give a pod or -l, not both"},
		{"logs of another type", "", []string{"logs", "deploy/web"}, 2, `"deploy/web": name a pod as NAME or pod/NAME`},
		{"exec in another type", "", []string{"exec", "svc/web", "--", "true"}, 2, `"svc/web": name a pod as NAME or pod/NAME`},
		{"delete needs pods", "", []string{"delete"}, 2, "name the pods"},
		{"bad address", "", []string{"get", "--address", "ftp://x"}, 2, "--address ftp://x"},
		{"config file must exist when named", "", []string{"get", "--config", filepath.Join(dir, "none.yaml")}, 1, "config file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, nil, tt.stdin, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", r.code, tt.wantCode, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing on error", r.stdout)
			}
			if !strings.HasPrefix(r.stderr, "error: ") || !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("stderr = %q, want \"error: …%s…\"", r.stderr, tt.wantErr)
			}
		})
	}
}

func TestVersionClientOnly(t *testing.T) {
	r := runCLI(t, nil, "", "version", "--client")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "client: podsyncctl ") || strings.Contains(r.stdout, "server") {
		t.Errorf("version --client: exit %d, output %q", r.code, r.stdout)
	}
}

// TestUnreachable: a podsyncd that is not there is a readable error with
// a hint, exit 1; version still prints the client.
func TestUnreachable(t *testing.T) {
	env := map[string]string{"PODSYNC_ADDRESS": "unix://" + filepath.Join(t.TempDir(), "none.sock")}
	r := runCLI(t, env, "", "get")
	if r.code != 1 || !strings.Contains(r.stderr, "error: cannot reach podsyncd at unix://") || !strings.Contains(r.stderr, "--address") {
		t.Errorf("get: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, env, "", "version")
	if r.code != 0 || !strings.Contains(r.stdout, "client: podsyncctl") || !strings.Contains(r.stdout, "is not reachable") {
		t.Errorf("version: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestAddressSources: --address beats $PODSYNC_ADDRESS, which beats the
// config file, whose relative TLS paths are relative to it.
func TestAddressSources(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "podsync", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("address: unix:///from/config.sock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"default", nil, nil, "unix:///run/podsync/podsync.sock"},
		{"config file in XDG_CONFIG_HOME", map[string]string{"XDG_CONFIG_HOME": dir}, nil, "unix:///from/config.sock"},
		{"config file by flag", nil, []string{"--config", cfg}, "unix:///from/config.sock"},
		{"environment beats config", map[string]string{"XDG_CONFIG_HOME": dir, "PODSYNC_ADDRESS": "/from/env.sock"}, nil, "/from/env.sock"},
		{"flag beats environment", map[string]string{"PODSYNC_ADDRESS": "/from/env.sock"}, []string{"--address", "unix:///from/flag.sock"}, "unix:///from/flag.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, tt.env, "", append([]string{"get"}, tt.args...)...)
			if r.code != 1 || !strings.Contains(r.stderr, "cannot reach podsyncd at "+tt.want+":") {
				t.Errorf("exit %d, stderr %q, want it to name %s", r.code, r.stderr, tt.want)
			}
		})
	}
	if err := os.WriteFile(cfg, []byte("server: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, map[string]string{"XDG_CONFIG_HOME": dir}, "", "get")
	if r.code != 1 || !strings.Contains(r.stderr, `unknown field "server"`) {
		t.Errorf("unknown config key: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestConvertDeploymentWithServiceGolden: a Deployment's pod template
// becomes its replicas, labelled with the workload, and the Service beside
// it is skipped with a notice on stderr.
func TestConvertDeploymentWithServiceGolden(t *testing.T) {
	r := runCLI(t, nil, "", "convert", "-f", "../../testdata/workloads/deployment.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	golden(t, "convert-deployment.json", r.stdout)
	golden(t, "convert-deployment.stderr", r.stderr)
}
