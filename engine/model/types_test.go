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

// TestNeedsLogFallback is the kubelet's fallbackToLogs: the log is read
// for FallbackToLogsOnError, a failed container that ran and no message
// of its own.
func TestNeedsLogFallback(t *testing.T) {
	failed := func(mut func(*model.ContainerInstance)) *model.ContainerInstance {
		c := &model.ContainerInstance{State: model.ContainerExited, ExitCode: 1, Reason: "Error", TerminationMessagePolicy: "FallbackToLogsOnError"}
		mut(c)
		return c
	}
	for _, tc := range []struct {
		name string
		c    *model.ContainerInstance
		want bool
	}{
		{"failed, no message", failed(func(*model.ContainerInstance) {}), true},
		{"succeeded", failed(func(c *model.ContainerInstance) { c.ExitCode, c.Reason = 0, "Completed" }), false},
		{"a message of its own", failed(func(c *model.ContainerInstance) { c.TerminationMessage = "disk full" }), false},
		{"policy File", failed(func(c *model.ContainerInstance) { c.TerminationMessagePolicy = "File" }), false},
		{"still running", failed(func(c *model.ContainerInstance) { c.State = model.ContainerRunning }), false},
		{"never ran", failed(func(c *model.ContainerInstance) { c.Reason = model.ReasonContainerCannotRun }), false},
	} {
		if got := model.NeedsLogFallback(tc.c); got != tc.want {
			t.Errorf("%s: NeedsLogFallback = %v, want %v", tc.name, got, tc.want)
		}
	}
}
