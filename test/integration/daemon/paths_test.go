//go:build integration

package daemon_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// TestPathsCannotEscape runs a real container with a subPath of an
// emptyDir and a hostPath under a :ro prefix that the pod asks read-write:
// the subPath shows the volume's directory, and a write to the hostPath
// fails with EROFS inside the container. A hostPath on containerd's own
// root (as the runtime reports it in CRI Status) is refused at admission
// with PolicyHostPath naming it, although an allowed prefix contains it.
func TestPathsCannotEscape(t *testing.T) {
	ctx := testContext(t)
	base := t.TempDir()
	roDir := filepath.Join(base, "ro")
	if err := os.MkdirAll(filepath.Join(roDir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(roDir, "data", "hello"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startPodsyncd(t, daemonOptions{Args: []string{
		"--allowed-host-paths=" + roDir + ":ro",
		// Contains containerd's root: podsyncd warns, and keeps it refused.
		"--allowed-host-paths=" + inst.Dir() + ":rw",
	}})
	runPods := func(pods ...*podsyncv1.Pod) *podsyncv1.RunPodsSummary {
		t.Helper()
		stream, err := d.client().RunPods(ctx, &podsyncv1.RunPodsRequest{Pods: pods, Timeout: durationpb.New(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				t.Fatal("RunPods ended without a summary")
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := msg.GetSummary(); s != nil {
				return s
			}
		}
	}

	app := sleeper("app")
	app.VolumeMounts = []corev1.VolumeMount{
		{Name: "shared", MountPath: "/sub", SubPath: "a/b"},
		{Name: "host", MountPath: "/ro", ReadOnly: false},
	}
	pod := newCorePod(t, "", app)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: filepath.Join(roDir, "data"), Type: ptr.To(corev1.HostPathDirectory)}}},
	}
	sum := runPods(podToProto(t, pod))
	if r := sum.GetResults(); len(r) != 1 || r[0].GetOutcome() != podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET {
		t.Fatalf("RunPods: %v", sum)
	}
	id := sum.GetResults()[0].GetStatus().GetContainerStatuses()[0].GetContainerId()
	rs := runtimeClient(t)
	exec := func(script string) (string, int32) {
		t.Helper()
		stdout, stderr, err := rs.ExecSync(ctx, strings.TrimPrefix(id, "containerd://"), []string{"/bin/sh", "-c", script}, 30*time.Second)
		var ee utilexec.CodeExitError
		if errors.As(err, &ee) {
			return string(stdout) + string(stderr), int32(ee.ExitStatus())
		}
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return string(stdout) + string(stderr), 0
	}
	if out, code := exec("cat /ro/hello && echo x > /ro/new"); code == 0 || !strings.Contains(out, "Read-only file system") || !strings.HasPrefix(out, "hi") {
		t.Errorf("write under the :ro prefix: exit %d, %q; want the file readable and EROFS", code, out)
	}
	if _, err := os.Stat(filepath.Join(roDir, "data", "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was written under the :ro prefix: %v", err)
	}
	if out, code := exec("echo data > /sub/f"); code != 0 {
		t.Fatalf("write to the subPath: exit %d, %q", code, out)
	}
	vol := filepath.Join(d.opts.RootDir, "pods", string(pod.UID), "volumes", "empty-dir", "shared", "a", "b", "f")
	if b, err := os.ReadFile(vol); err != nil || string(b) != "data\n" {
		t.Errorf("the subPath's file in the volume: %q, %v", b, err)
	}

	// containerd's root, from CRI Status on both flavours.
	cRoot := filepath.Join(inst.Dir(), "root")
	bad := newCorePod(t, "runtime-root", sleeper("app"))
	bad.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: cRoot}}}}
	sum = runPods(podToProto(t, bad))
	r := sum.GetResults()
	if len(r) != 1 || r[0].GetReason() != "PolicyHostPath" || !strings.Contains(r[0].GetMessage(), cRoot) ||
		!strings.Contains(r[0].GetMessage(), "runtime's root") {
		t.Errorf("a hostPath on containerd's root: %v; want PolicyHostPath naming %s", r, cRoot)
	}
	if !d.logHas("allowed host path prefix contains", cRoot) {
		t.Errorf("no warning that %s:rw contains containerd's root", inst.Dir())
	}
}
