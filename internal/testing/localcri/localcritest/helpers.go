package localcritest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// Busybox is a container of the local busybox image; without a command it
// runs the image's default, which exits 0 promptly on SIGTERM.
func Busybox(name string, command ...string) corev1.Container {
	return corev1.Container{
		Name: name, Image: localcri.BusyboxImage, Command: command,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		TerminationMessagePath:   "/dev/termination-log",
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
}

// Shell is a busybox container running script under sh, which exits at
// once on SIGTERM.
func Shell(name, script string) corev1.Container {
	return Busybox(name, "/bin/sh", "-c", "trap 'exit 0' TERM; "+script)
}

// Crictl runs crictl against inst — the tests' oracle for what the runtime
// really holds — and fails the test if it fails.
func Crictl(t *testing.T, inst *localcri.Instance, args ...string) string {
	t.Helper()
	out, err := crictl(t, inst, args...)
	if err != nil {
		t.Fatalf("crictl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// crictl runs crictl against inst, within a minute, and returns its
// combined output.
func crictl(t *testing.T, inst *localcri.Instance, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	hint := strings.Fields(inst.CrictlHint())
	return exec.CommandContext(ctx, hint[0], append(hint[1:], args...)...).CombinedOutput()
}

// CrictlIDs runs a crictl listing with -q and returns the IDs.
func CrictlIDs(t *testing.T, inst *localcri.Instance, args ...string) []string {
	t.Helper()
	return strings.Fields(Crictl(t, inst, append(args, "-q")...))
}

// StopSandbox is `crictl stopp id` on a sandbox a live node also manages.
// The node, seeing the sandbox's containers die, may stop the sandbox at
// the same moment; containerd then fails one of the two StopPodSandbox
// calls on the network teardown the other did ("failed to delete eth0").
// That is no failure of the test's stop: it fails only if the sandbox is
// not stopped afterwards.
func StopSandbox(t *testing.T, inst *localcri.Instance, id string) {
	t.Helper()
	out, err := crictl(t, inst, "stopp", id)
	if err == nil {
		return
	}
	state, ierr := crictl(t, inst, "inspectp", "-o", "go-template", "--template", "{{.status.state}}", id)
	if ierr == nil && strings.TrimSpace(string(state)) == "SANDBOX_NOTREADY" {
		t.Logf("crictl stopp %s failed but the sandbox is stopped (the node stopped it too): %v: %s", id, err, out)
		return
	}
	t.Fatalf("crictl stopp %s: %v: %s", id, err, out)
}
