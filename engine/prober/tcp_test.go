package prober

import (
	"errors"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestTCPProbe(t *testing.T) {
	open, closed := listen(t), closedPort(t)
	dialer := &loopbackOnly{}
	p := newTestProber(t, Options{DialContext: dialer.DialContext})
	c := &corev1.Container{Name: "c", Ports: []corev1.ContainerPort{
		{Name: "probe", ContainerPort: int32(open)},
		{Name: "shut", ContainerPort: int32(closed)},
	}}
	tests := []struct {
		name    string
		port    intstr.IntOrString
		host    string
		target  string
		want    outcome
		wantErr bool
	}{
		{name: "open port", port: portInt(open), target: "127.0.0.1", want: outcomeSuccess},
		{name: "named port", port: intstr.FromString("probe"), target: "127.0.0.1", want: outcomeSuccess},
		{name: "number as a string", port: intstr.FromString(strconv.Itoa(open)), target: "127.0.0.1", want: outcomeSuccess},
		{name: "probe host", port: portInt(open), host: "127.0.0.1", want: outcomeSuccess},
		{name: "closed port", port: portInt(closed), target: "127.0.0.1", want: outcomeFailure},
		{name: "closed named port", port: intstr.FromString("shut"), target: "127.0.0.1", want: outcomeFailure},
		{name: "unknown port name", port: intstr.FromString("nope"), target: "127.0.0.1", wantErr: true},
		{name: "no address", port: portInt(open), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			action := &corev1.TCPSocketAction{Port: tt.port, Host: tt.host}
			o, out, err := p.tcpProbe(t.Context(), action, target{container: c, host: tt.target}, time.Second)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %t", err, tt.wantErr)
			}
			if err == nil && o != tt.want {
				t.Fatalf("outcome = %d (%q), want %d", o, out, tt.want)
			}
		})
	}
	for _, a := range dialer.addresses() {
		if a != "127.0.0.1:"+strconv.Itoa(open) && a != "127.0.0.1:"+strconv.Itoa(closed) {
			t.Fatalf("dialled %s", a)
		}
	}
}

func TestResolvePort(t *testing.T) {
	c := &corev1.Container{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	tests := []struct {
		port    intstr.IntOrString
		want    int
		wantErr bool
	}{
		{port: intstr.FromInt32(80), want: 80},
		{port: intstr.FromString("http"), want: 8080},
		{port: intstr.FromString("9090"), want: 9090},
		{port: intstr.FromString("metrics"), wantErr: true},
		{port: intstr.FromInt32(0), wantErr: true},
		{port: intstr.FromInt32(65536), wantErr: true},
		{port: intstr.FromString("-1"), wantErr: true},
	}
	for _, tt := range tests {
		got, err := resolvePort(tt.port, c)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("resolvePort(%s) = (%d, %v), want (%d, error %t)", tt.port.String(), got, err, tt.want, tt.wantErr)
		}
	}
}

func TestHostPortNeedsHost(t *testing.T) {
	if _, err := hostPort("", 80); !errors.Is(err, errNoHost) {
		t.Fatalf("err = %v, want errNoHost", err)
	}
}
