package admit

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParseHostPathPrefix(t *testing.T) {
	tests := []struct {
		in      string
		want    HostPathPrefix
		wantErr string
	}{
		{"/srv/data:ro", HostPathPrefix{Path: "/srv/data", ReadOnly: true}, ""},
		{"/srv/data/:rw", HostPathPrefix{Path: "/srv/data"}, ""},
		{"/srv/a:b:rw", HostPathPrefix{Path: "/srv/a:b"}, ""},
		{"/srv/data", HostPathPrefix{}, "add :ro or :rw"},
		{"/srv/data:RW", HostPathPrefix{}, "add :ro or :rw"},
		{"srv:ro", HostPathPrefix{}, "absolute"},
	}
	for _, tt := range tests {
		got, err := ParseHostPathPrefix(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseHostPathPrefix(%q) = %v, want an error containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseHostPathPrefix(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

// TestCheckHostPathNamesTheDeniedPath: the refusal says which path is
// denied, why, and how the hostPath relates to it.
func TestCheckHostPathNamesTheDeniedPath(t *testing.T) {
	p := Policy{
		AllowedHostPaths: []HostPathPrefix{{Path: "/"}, {Path: "/srv/ro", ReadOnly: true}},
		DeniedHostPaths: []DeniedHostPath{
			{Path: "/var/lib/podsync", Why: "podsync's root directory (--root-dir)"},
			{Path: "/run/containerd/containerd.sock", Why: "the runtime's socket (--runtime-endpoint)"},
		},
	}
	for _, tt := range []struct{ path, want string }{
		{"/var", "/var contains /var/lib/podsync, podsync's root directory (--root-dir)"},
		{"/var/lib/podsync/pods/x", "lies inside /var/lib/podsync"},
		{"/run/containerd/containerd.sock", "is /run/containerd/containerd.sock, the runtime's socket"},
	} {
		_, err := p.CheckHostPath(tt.path)
		if !errors.Is(err, ErrHostPathDenied) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckHostPath(%q) = %v, want ErrHostPathDenied saying %q", tt.path, err, tt.want)
		}
		if p.HostPathAllowed(tt.path) {
			t.Errorf("HostPathAllowed(%q) = true", tt.path)
		}
	}
	pre, err := p.CheckHostPath("/srv/ro/x")
	if err != nil || !pre.ReadOnly || pre.Path != "/srv/ro" {
		t.Errorf("CheckHostPath(/srv/ro/x) = %+v, %v; want the longest prefix, /srv/ro:ro", pre, err)
	}
	if got := p.DeniedInside(HostPathPrefix{Path: "/var"}); len(got) != 1 || got[0].Path != "/var/lib/podsync" {
		t.Errorf("DeniedInside(/var) = %v", got)
	}
}

// TestPolicyHostPathMessage: the admission refusal names the volume, the
// denied path and why it is denied.
func TestPolicyHostPathMessage(t *testing.T) {
	p := pod("a", nil)
	p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var"}}}}
	r := CheckPolicy(p, node, denyingPolicy)
	for _, w := range []string{`"v"`, "/var contains /var/lib/podsync", "podsync's root directory (--root-dir)"} {
		if r.Reason != ReasonPolicyHostPath || !strings.Contains(r.Message, w) {
			t.Errorf("CheckPolicy = %+v, want %s saying %q", r, ReasonPolicyHostPath, w)
		}
	}
}
