package criconfig_test

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
)

// TestVerifyRunAsNonRoot is the kubelet's table
// (pkg/kubelet/kuberuntime/security_context_others_test.go), with rows for
// the pod-level security context and its override by the container's.
func TestVerifyRunAsNonRoot(t *testing.T) {
	root, anyUser := int64(0), int64(1000)
	invalid, negative, maxInt32 := int64(2147483648), int64(-1000), int64(math.MaxInt32)
	for _, tc := range []struct {
		desc     string
		psc      *corev1.PodSecurityContext
		sc       *corev1.SecurityContext
		uid      *int64
		username string
		fail     bool
		message  string
	}{
		{desc: "pass if SecurityContext is not set", uid: &root},
		{desc: "pass if RunAsUser is non-root and RunAsNonRoot is true",
			sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: &anyUser}},
		{desc: "pass if RunAsNonRoot is not set", sc: &corev1.SecurityContext{RunAsUser: &root}, uid: &root},
		{desc: "pass if RunAsNonRoot is false (image user is root)", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(false)}, uid: &root},
		{desc: "pass if RunAsNonRoot is false (RunAsUser is root)",
			sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(false), RunAsUser: &root}, uid: &root},
		{desc: "fail if container's RunAsUser is root and RunAsNonRoot is true",
			sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: &root}, uid: &root, fail: true,
			message: `container's runAsUser breaks non-root policy (pod: "bar_new(12345678)", container: foo)`},
		{desc: "fail if image's user is root and RunAsNonRoot is true",
			sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, uid: &root, fail: true,
			message: `container has runAsNonRoot and image will run as root (pod: "bar_new(12345678)", container: foo)`},
		{desc: "fail if image's username is set and RunAsNonRoot is true",
			sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, username: "test", fail: true,
			message: `container has runAsNonRoot and image has non-numeric user (test), cannot verify user is non-root (pod: "bar_new(12345678)", container: foo)`},
		{desc: "pass if image's user is non-root and RunAsNonRoot is true", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, uid: &anyUser},
		{desc: "pass if container's user and image's user aren't set and RunAsNonRoot is true", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}},
		{desc: "fail if image's user is invalid and RunAsNonRoot is true", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, uid: &invalid, fail: true},
		{desc: "fail if image's user is negative and RunAsNonRoot is true", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, uid: &negative, fail: true},
		{desc: "pass if image's user is math.MaxInt32 and RunAsNonRoot is true", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, uid: &maxInt32},
		{desc: "fail if the pod's RunAsUser is root and its RunAsNonRoot is true",
			psc: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: &root}, uid: &anyUser, fail: true},
		{desc: "pass if the container's RunAsUser overrides the pod's root",
			psc: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: &root}, sc: &corev1.SecurityContext{RunAsUser: &anyUser}},
		{desc: "pass if the container's RunAsNonRoot false overrides the pod's",
			psc: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(false)}, uid: &root},
		{desc: "fail if the pod's RunAsNonRoot applies to an image running as root",
			psc: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, uid: &root, fail: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{UID: "12345678", Name: "bar", Namespace: "new"},
				Spec: corev1.PodSpec{SecurityContext: tc.psc, Containers: []corev1.Container{
					{Name: "foo", Image: "busybox", SecurityContext: tc.sc}}},
			}
			err := criconfig.VerifyRunAsNonRoot(pod, &pod.Spec.Containers[0], tc.uid, tc.username)
			if (err != nil) != tc.fail {
				t.Fatalf("VerifyRunAsNonRoot = %v, want failure %v", err, tc.fail)
			}
			if tc.message != "" && err.Error() != tc.message {
				t.Errorf("message %q, want the kubelet's %q", err, tc.message)
			}
		})
	}
}

// TestImageUser: an image's numeric uid, else its user name; neither (or
// no image) is root, as the kubelet's getImageUser has it.
func TestImageUser(t *testing.T) {
	for _, tc := range []struct {
		img      *runtimeapi.Image
		uid      *int64
		username string
	}{
		{nil, ptr.To(int64(0)), ""},
		{&runtimeapi.Image{}, ptr.To(int64(0)), ""},
		{&runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 1000}}, ptr.To(int64(1000)), ""},
		{&runtimeapi.Image{Username: "nobody"}, nil, "nobody"},
	} {
		uid, name := criconfig.ImageUser(tc.img)
		if (uid == nil) != (tc.uid == nil) || (uid != nil && *uid != *tc.uid) || name != tc.username {
			t.Errorf("ImageUser(%v) = %v, %q; want %v, %q", tc.img, uid, name, tc.uid, tc.username)
		}
	}
}
