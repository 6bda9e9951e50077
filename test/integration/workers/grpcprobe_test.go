//go:build integration

package workers_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// buildGRPCHealth builds testdata/grpchealth, a static grpc health
// server, into a new directory and returns the directory.
func buildGRPCHealth(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(dir, "grpchealth"), "./testdata/grpchealth")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the grpc health server: %v\n%s", err, out)
	}
	return dir
}

// TestGRPCLivenessProbeRestarts: a grpc liveness probe against a grpc
// health server in the pod passes while it answers SERVING and restarts
// the container once it answers NOT_SERVING, with the kubelet's events.
func TestGRPCLivenessProbeRestarts(t *testing.T) {
	bin := buildGRPCHealth(t)
	e := newEnv(t, func(o *engine.NodeOptions) {
		o.HostPaths = admit.Policy{AllowedHostPaths: []admit.HostPathPrefix{{Path: bin, ReadOnly: true}}}
	})
	c := localcritest.Busybox("app", "/opt/grpc/grpchealth", ":9090", "/tmp/unhealthy")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "bin", MountPath: "/opt/grpc", ReadOnly: true}}
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Service: ptr.To("")}},
		// The server's start is not the probe's business: on a loaded
		// machine it can take longer than one period.
		InitialDelaySeconds: 2,
		PeriodSeconds:       1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 2,
	}
	pod := e.newPod("", c)
	pod.Spec.Volumes = []corev1.Volume{{Name: "bin", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: bin, Type: ptr.To(corev1.HostPathDirectory)}}}}
	e.apply(pod)
	e.eventually("running", func() bool { return e.running(pod, "app") != nil })
	first := e.running(pod, "app")
	// Healthy: several probe periods without a restart.
	e.eventually("5 s of running", func() bool { return time.Since(first.StartedAt) > 5*time.Second })
	if inst := e.running(pod, "app"); inst == nil || inst.ID != first.ID || slices.Contains(e.events(pod), engine.EventUnhealthy) {
		t.Fatalf("app %+v, events %v: want it running unrestarted while SERVING", inst, e.events(pod))
	}
	localcritest.Crictl(t, inst, "exec", first.ID, "touch", "/tmp/unhealthy")
	e.eventually("restarted by the grpc liveness probe", func() bool {
		inst := e.running(pod, "app")
		return inst != nil && inst.ID != first.ID && inst.RestartCount == 1
	})
	e.eventually("Unhealthy and Killing events", func() bool {
		ev := e.events(pod)
		return slices.Contains(ev, engine.EventUnhealthy) && slices.Contains(ev, engine.EventKilling)
	})
}
