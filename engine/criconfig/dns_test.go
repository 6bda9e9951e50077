package criconfig

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/errdefs"
)

// TestPodHostnameAndDomain is the kubelet's TestGeneratePodHostNameAndDomain
// (pkg/kubelet/kubelet_pods_test.go), with hostnameOverride (v1.37).
func TestPodHostnameAndDomain(t *testing.T) {
	tests := []struct {
		name             string
		podName          string
		hostname         string
		subdomain        string
		hostnameOverride *string
		wantHostname     string
		wantDomain       string
		wantErr          string
	}{
		{name: "Default behavior - pod name as hostname", podName: "test-pod", wantHostname: "test-pod"},
		{name: "Custom Hostname - uses pod.Spec.Hostname", podName: "test-pod", hostname: "custom-hostname", wantHostname: "custom-hostname"},
		{name: "Custom Subdomain - constructs FQDN", podName: "test-pod", subdomain: "my-subdomain",
			wantHostname: "test-pod", wantDomain: "my-subdomain.default.svc.cluster.local"},
		{name: "Custom Hostname and Subdomain - uses both", podName: "test-pod", hostname: "custom-hostname", subdomain: "my-subdomain",
			wantHostname: "custom-hostname", wantDomain: "my-subdomain.default.svc.cluster.local"},
		{name: "HostnameOverride - overrides all", podName: "test-pod", hostname: "custom-hostname", subdomain: "my-subdomain",
			hostnameOverride: ptr.To("override-hostname"), wantHostname: "override-hostname"},
		{name: "HostnameOverride - overrides all - invalid hostname", podName: "test-pod", hostname: "custom-hostname", subdomain: "my-subdomain",
			hostnameOverride: ptr.To("Invalid-Hostname-!"), wantErr: `pod HostnameOverride "Invalid-Hostname-!" is not a valid DNS subdomain`},
		{name: "HostnameOverride - overrides all - valid DNS hostname", podName: "test-pod",
			hostnameOverride: ptr.To("valid.hostname"), wantHostname: "valid.hostname"},
		{name: "Hostname Truncation - pod name is too long", podName: strings.Repeat("a", 65), wantHostname: strings.Repeat("a", 63)},
		{name: "Validation - invalid hostname", podName: "test-pod", hostname: "Invalid-Hostname-!",
			wantErr: `pod Hostname "Invalid-Hostname-!" is not a valid DNS label`},
		{name: "Validation - invalid subdomain", podName: "test-pod", subdomain: "invalid_subdomain",
			wantErr: `pod Subdomain "invalid_subdomain" is not a valid DNS label`},
		{name: "Validation - too long hostname", podName: "test-pod", hostname: strings.Repeat("a", 64),
			wantErr: "must be no more than 63 characters"},
		// podsync's: an override of 64 characters (the API server's
		// bound) is truncated as a long pod name is.
		{name: "HostnameOverride truncated to 63 characters without a trailing dot", podName: "test-pod",
			hostnameOverride: ptr.To(strings.Repeat("a", 62) + ".bc"), wantHostname: strings.Repeat("a", 62)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: tt.podName, Namespace: "default"},
				Spec:       corev1.PodSpec{Hostname: tt.hostname, Subdomain: tt.subdomain, HostnameOverride: tt.hostnameOverride},
			}
			host, domain, err := PodHostnameAndDomain(pod, Options{ClusterDomain: "cluster.local"})
			if tt.wantErr != "" {
				if !errors.Is(err, errdefs.ErrInvalidSpec) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want ErrInvalidSpec containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if host != tt.wantHostname || domain != tt.wantDomain {
				t.Errorf("hostname, domain = %q, %q, want %q, %q", host, domain, tt.wantHostname, tt.wantDomain)
			}
		})
	}
}

// TestTruncateHostname is the kubelet's TestTruncatePodHostname.
func TestTruncateHostname(t *testing.T) {
	tests := []struct{ name, input, want string }{
		{"valid hostname", "test.pod.hostname", "test.pod.hostname"},
		{"too long hostname", "1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567.", "1234567.1234567.1234567.1234567.1234567.1234567.1234567.1234567"},
		{"hostname end with .", "1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456.1234567.", "1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456"},
		{"hostname end with -", "1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456-1234567.", "1234567.1234567.1234567.1234567.1234567.1234567.1234567.123456"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := truncateHostname("test-pod", tt.input)
			if err != nil || got != tt.want {
				t.Errorf("truncateHostname = %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}
