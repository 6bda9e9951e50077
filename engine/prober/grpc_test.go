package prober

import (
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	grpchealth "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// grpcServer serves grpc.health.v1 on a loopback port (with the health
// service unless bare) and returns the port and the health server.
func grpcServer(t *testing.T, bare bool) (int32, *health.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	if !bare {
		grpchealth.RegisterHealthServer(srv, hs)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return int32(lis.Addr().(*net.TCPAddr).Port), hs
}

// TestGRPCProbe ports the kubelet's pkg/probe/grpc cases: SERVING is
// success; NOT_SERVING, an unknown service, a server without the health
// service and no server at all are failures with the kubelet's messages,
// never errors.
func TestGRPCProbe(t *testing.T) {
	port, hs := grpcServer(t, false)
	hs.SetServingStatus("up", grpchealth.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", grpchealth.HealthCheckResponse_NOT_SERVING)
	barePort, _ := grpcServer(t, true)
	closed := int32(closedPort(t))
	dialer := &loopbackOnly{}
	p := newTestProber(t, Options{DialContext: dialer.DialContext})
	c := &corev1.Container{Name: "c"}
	tests := []struct {
		name    string
		action  corev1.GRPCAction
		host    string
		want    outcome
		wantOut string
		wantErr bool
	}{
		{name: "server serving", action: corev1.GRPCAction{Port: port, Service: ptr.To("")}, host: "127.0.0.1",
			want: outcomeSuccess, wantOut: "service healthy"},
		{name: "service serving", action: corev1.GRPCAction{Port: port, Service: ptr.To("up")}, host: "127.0.0.1",
			want: outcomeSuccess, wantOut: "service healthy"},
		{name: "service not serving", action: corev1.GRPCAction{Port: port, Service: ptr.To("down")}, host: "127.0.0.1",
			want: outcomeFailure, wantOut: `service unhealthy (responded with "NOT_SERVING")`},
		{name: "unknown service", action: corev1.GRPCAction{Port: port, Service: ptr.To("absent")}, host: "127.0.0.1",
			want: outcomeFailure, wantOut: "error: health rpc probe failed: "},
		{name: "no health service", action: corev1.GRPCAction{Port: barePort}, host: "127.0.0.1",
			want: outcomeFailure, wantOut: "error: this server does not implement the grpc health protocol (grpc.health.v1.Health)"},
		{name: "nothing listening", action: corev1.GRPCAction{Port: closed}, host: "127.0.0.1",
			want: outcomeFailure, wantOut: "timeout: failed to connect service"},
		{name: "no address", action: corev1.GRPCAction{Port: port}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, out, err := p.grpcProbe(t.Context(), &tt.action, target{container: c, host: tt.host}, 300*time.Millisecond)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %t", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if o != tt.want || !strings.HasPrefix(out, tt.wantOut) {
				t.Fatalf("outcome = %d (%q), want %d (%q…)", o, out, tt.want, tt.wantOut)
			}
		})
	}
	// The status changes as the server's does.
	hs.SetServingStatus("up", grpchealth.HealthCheckResponse_NOT_SERVING)
	if o, out, _ := p.run(t.Context(), &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port, Service: ptr.To("up")}}, TimeoutSeconds: 1},
		target{container: c, host: "127.0.0.1"}); o != outcomeFailure {
		t.Errorf("after NOT_SERVING: outcome = %d (%q), want failure", o, out)
	}
	for _, a := range dialer.addresses() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("dialled %s", a)
		}
	}
}
