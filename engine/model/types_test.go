package model_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
)

// TestSandboxFromCRIKeepsAnAbsentNetworkStatusApart: a sandbox without a
// network status decodes to nil IPs, one whose status has no IP to empty
// ones, so that PodSandboxChanged can apply the kubelet's missing-IP rule
// only to the latter.
func TestSandboxFromCRIKeepsAnAbsentNetworkStatusApart(t *testing.T) {
	tests := []struct {
		name string
		net  *runtimeapi.PodSandboxNetworkStatus
		want []string
	}{
		{name: "no network status", net: nil, want: nil},
		{name: "a network status without an IP", net: &runtimeapi.PodSandboxNetworkStatus{}, want: []string{}},
		{name: "primary and additional IPs", want: []string{"10.0.0.5", "fd00::5"}, net: &runtimeapi.PodSandboxNetworkStatus{
			Ip: "10.0.0.5", AdditionalIps: []*runtimeapi.PodIP{{Ip: "fd00::5"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := model.SandboxFromCRI(&runtimeapi.PodSandboxStatus{Id: "sb", Network: tt.net}).IPs
			if (got == nil) != (tt.want == nil) {
				t.Errorf("IPs = %#v, want %#v", got, tt.want)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("IPs (-want +got):\n%s", diff)
			}
		})
	}
}
