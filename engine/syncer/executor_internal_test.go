package syncer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestApplyDefaultImageTag(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"busybox", "busybox:latest"},
		{"busybox:1.36", "busybox:1.36"},
		{"localhost:5000/a/b", "localhost:5000/a/b:latest"},
		{"127.0.0.1:40123/busybox:local", "127.0.0.1:40123/busybox:local"},
		{"reg.io/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "reg.io/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		{"UPPER/case", ""},
		{"", ""},
		{"a b", ""},
	} {
		got, err := applyDefaultImageTag(tc.in)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("applyDefaultImageTag(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestPullPolicyDefault(t *testing.T) {
	for img, want := range map[string]corev1.PullPolicy{
		"busybox": corev1.PullAlways, "busybox:latest": corev1.PullAlways, "busybox:1": corev1.PullIfNotPresent,
		"x.io/busybox@sha256:0123456789abcdef0123456789abcdef": corev1.PullIfNotPresent,
	} {
		if got := pullPolicy(&corev1.Container{Image: img}); got != want {
			t.Errorf("pullPolicy(%s) = %s, want %s", img, got, want)
		}
	}
}
