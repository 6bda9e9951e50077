package prober

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestManagerNetworkProbes runs tcpSocket and httpGet probes through the
// Manager: a host-network pod dials the node IP (127.0.0.1), another pod
// its pod IP (127.0.0.1 too).
func TestManagerNetworkProbes(t *testing.T) {
	srv := newTestServer(t, false)
	open, closed := listen(t), closedPort(t)
	h := newHarness(t)
	dialer := &loopbackOnly{}
	h.m.Stop()
	h.m = h.newManager(Options{NodeIP: "127.0.0.1", DialContext: dialer.DialContext})

	hostNet := newPod("host", corev1.Container{
		Name:  "web",
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(srv.port(t))}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/status/200", Port: intstr.FromString("http")}},
			PeriodSeconds:    10,
			SuccessThreshold: 1,
			FailureThreshold: 3,
		},
		LivenessProbe: withThresholds(&corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: portInt(open)}},
		}, 1, 1),
	})
	hostNet.Spec.HostNetwork = true
	// A host-network pod's address is the node's, whatever the caller
	// passed (loopbackOnly refuses anything but 127.0.0.1 without dialling).
	web := running("web", "h1")
	web.PodIP = "192.0.2.1"
	h.m.Sync(hostNet, []RunningContainer{web})

	plain := newPod("plain", corev1.Container{
		Name: "db",
		LivenessProbe: withThresholds(&corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: portInt(closed)}},
		}, 1, 1),
	})
	h.m.Sync(plain, []RunningContainer{running("db", "p1")})

	got := map[string]Update{}
	for range 2 {
		u := h.update()
		got[u.ContainerID] = u
	}
	if u := got["h1"]; u.Type != Readiness || u.Result != Success || u.PodUID != "host" || u.ContainerName != "web" || u.Output != "body-200" {
		t.Errorf("host-network pod's update = %+v, want readiness Success", u)
	}
	if u := got["p1"]; u.Type != Liveness || u.Result != Failure || u.PodUID != "plain" || u.Output == "" {
		t.Errorf("pod's update = %+v, want liveness Failure with the dial error", u)
	}
	h.settle(2) // the host-network pod's workers; db's liveness ended
	h.wantResult("host", Liveness, "h1", Success)
	h.noUpdate()
	for _, a := range dialer.addresses() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("dialled %s", a)
		}
	}
	if len(srv.requests()) != 1 {
		t.Fatalf("%d HTTP requests, want 1", len(srv.requests()))
	}
}
