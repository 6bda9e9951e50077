//go:build integration

package engine_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// TestSubPathExprMountsThePodsDirectory: subPathExpr $(POD_NAME), with
// POD_NAME from the downward API, mounts the volume's directory named
// after the pod, created for it; a variable the env does not set is
// refused.
func TestSubPathExprMountsThePodsDirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	c := localcritest.Shell("app", "echo written-by-app > /logs/app.log; while :; do sleep 1; done")
	c.Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/logs", SubPathExpr: "$(POD_NAME)"}}
	pod.Spec.Containers = []corev1.Container{c}
	e.until(pod, "running", e.running(pod))
	file := filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "logs", e.cfg), pod.Name, "app.log")
	var data []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if data, err = os.ReadFile(file); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if string(data) != "written-by-app\n" {
		t.Errorf("%s = %q, want what the container wrote to /logs", file, data)
	}

	// A variable the env does not set is refused, as the kubelet's
	// ExpandContainerVolumeMounts: never a directory named "$(UNSET)".
	bad := localcritest.Busybox("bad")
	bad.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/logs", SubPathExpr: "$(UNSET)"}}
	pod.Spec.Containers = append(pod.Spec.Containers, bad)
	res := e.sync(pod)
	st := res.Step(syncer.ActionStartContainer, "bad")
	if st == nil || st.Reason != syncer.ReasonCreateContainerConfigErr || !strings.Contains(st.Message, "missing value for UNSET") {
		t.Errorf("steps %v, want bad refused with CreateContainerConfigError naming UNSET", steps(res.Steps))
	}
}

// TestStopSignal: lifecycle.stopSignal stops the container with its
// signal on containerd 2.x (the container's trap gives its exit code);
// containerd 1.6 ignores the field, so the start is refused, saying so,
// and no container is left.
func TestStopSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod()
	pod.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](20)
	c := localcritest.Busybox("app", "/bin/sh", "-c", "trap 'exit 7' USR1; trap 'exit 0' TERM; while :; do sleep 1; done")
	c.Lifecycle = &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGUSR1)}
	pod.Spec.Containers = []corev1.Container{c}
	if inst.Flavour() == localcri.Containerd16 {
		res := e.sync(pod)
		st := res.Step(syncer.ActionStartContainer, "app")
		if st == nil || st.Reason != syncer.ReasonCreateContainerError ||
			!strings.Contains(st.Message, "ignores lifecycle.stopSignal SIGUSR1") || !errors.Is(st.Err, errdefs.ErrInvalidSpec) {
			t.Fatalf("steps %v, want the start refused for the ignored stop signal", steps(res.Steps))
		}
		if got := localcritest.CrictlIDs(t, inst, "ps", "-a", "--label", "io.kubernetes.pod.uid="+string(pod.UID)); len(got) != 0 {
			t.Errorf("containers left: %v", got)
		}
		return
	}
	e.until(pod, "running", e.running(pod))
	start := time.Now()
	pod.DeletionTimestamp = ptr.To(metav1.Now())
	res := e.sync(pod)
	if n := newest(t, res, "app"); n.State != model.ContainerExited || n.ExitCode != 7 {
		t.Errorf("app = %+v, want exited 7 (its SIGUSR1 trap)", n)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the stop took %s: not the stop signal, the grace period's SIGKILL", took)
	}
}
