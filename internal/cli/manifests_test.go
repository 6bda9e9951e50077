package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	psapi "k8s.io/pod-security-admission/api"

	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/internal/testing/testdaemon"
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
		// One round: validation's problems come with the type check's.
		{"problems-one-round.txt", []string{"convert", "-f", "testdata/input/one-round.yaml"}},
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

// TestGenerateName: run names a pod that has only a generateName on the
// node (prefix and five random characters), a new pod each run, as
// kubectl create; apply refuses it, saying why.
func TestGenerateName(t *testing.T) {
	d := startPodsyncd(t)
	names := map[string]bool{}
	for range 2 {
		r := d.run(t, "", "run", "-f", "testdata/input/generate-name.yaml")
		mustSucceed(t, "run", r)
		for _, l := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "default" && strings.HasPrefix(f[1], "web-") && f[2] == "Running" {
				names[f[1]] = true
			}
		}
	}
	if len(names) != 2 {
		t.Errorf("pods run: %v, want two, each named web-XXXXX", names)
	}
	for n := range names {
		if len(n) != len("web-")+5 {
			t.Errorf("pod %q: want web- and five characters", n)
		}
	}
	r := d.run(t, "", "apply", "-f", "testdata/input/generate-name.yaml")
	if r.code != 1 || !strings.Contains(r.stderr, "metadata.generateName: a name is generated only by RunPods (podsyncctl run)") ||
		!strings.Contains(r.stderr, "give metadata.name") {
		t.Errorf("apply: exit %d\n%s\nwant exit 1 saying run generates names and apply needs metadata.name", r.code, r.stderr)
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

// TestKubeadmStaticPod: a kubeadm static pod (system-node-critical,
// hostNetwork, a hostPath, seccomp RuntimeDefault, probes of 127.0.0.1)
// converts, with notices for what podsync accepts without acting on;
// podsyncd's default policy refuses it, and the privileged level, which
// kubeadm's kube-system has, runs it.
func TestKubeadmStaticPod(t *testing.T) {
	const file = "testdata/input/kubeadm-static-pod.yaml"
	r := runCLI(t, nil, "", "convert", "-f", file)
	if r.code != 0 {
		t.Fatalf("convert: exit %d\n%s", r.code, r.stderr)
	}
	golden(t, "convert-kubeadm-static-pod.json", r.stdout)
	golden(t, "convert-kubeadm-static-pod-notices.txt", r.stderr)

	// The hostPath in a directory of the test's, not the host's /var/lib.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	manifest := filepath.Join(dir, "etcd.yaml")
	if err := os.WriteFile(manifest, []byte(strings.ReplaceAll(string(data), "/var/lib/etcd", filepath.Join(dir, "etcd"))), 0o644); err != nil {
		t.Fatal(err)
	}
	alloc := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}
	d := startPodsyncdWith(t, false, testdaemon.Options{Allocatable: alloc, Policy: &admit.Policy{}})
	r = d.run(t, "", "run", "-f", manifest)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "PodSecurity") || !strings.Contains(r.stdout+r.stderr, "hostNetwork=true") {
		t.Errorf("run under the default policy: exit %d, want the pod refused for its host network\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// Its probes name the host 127.0.0.1, which even baseline with the
	// exemptions refuses (check hostProbesAndHostLifecycle): kubeadm's
	// kube-system is privileged, and so must the node's level be.
	r = startPodsyncdWith(t, false, testdaemon.Options{Allocatable: alloc, Policy: &admit.Policy{
		AllowHostNetwork: true, AllowedHostPaths: []admit.HostPathPrefix{{Path: dir}}}}).run(t, "", "run", "-f", manifest)
	if r.code == 0 || !strings.Contains(r.stdout, "check hostProbesAndHostLifecycle") {
		t.Errorf("run under baseline with the exemptions: exit %d, want the probes' host refused\nstdout:\n%s", r.code, r.stdout)
	}
	d = startPodsyncdWith(t, false, testdaemon.Options{Allocatable: alloc, Policy: &admit.Policy{Level: psapi.LevelPrivileged}})
	r = d.run(t, "", "run", "-f", manifest)
	mustSucceed(t, "run under a policy that allows it", r)
	if !hasRow(r.stdout, "kube-system", "etcd", "Running") {
		t.Errorf("run:\n%s", r.stdout)
	}
}
