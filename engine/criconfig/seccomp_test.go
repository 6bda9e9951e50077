package criconfig

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/plan/plantest"
)

// TestSeccompProfile is the kubelet's getSeccompProfile: the container's
// profile, else the pod's, else RuntimeDefault with SeccompDefault (the
// kubelet's --seccomp-default), else Unconfined; an explicit Unconfined
// stays Unconfined either way.
func TestSeccompProfile(t *testing.T) {
	rd := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	un := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	lh := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("audit.json")}
	for _, tc := range []struct {
		name           string
		pod, container *corev1.SeccompProfile
		seccompDefault bool
		want           runtimeapi.SecurityProfile_ProfileType
		ref            string
	}{
		{name: "none", want: runtimeapi.SecurityProfile_Unconfined},
		{name: "none with seccompDefault", seccompDefault: true, want: runtimeapi.SecurityProfile_RuntimeDefault},
		{name: "pod RuntimeDefault", pod: rd, want: runtimeapi.SecurityProfile_RuntimeDefault},
		{name: "container Unconfined over pod RuntimeDefault", pod: rd, container: un, want: runtimeapi.SecurityProfile_Unconfined},
		{name: "pod Unconfined with seccompDefault", pod: un, seccompDefault: true, want: runtimeapi.SecurityProfile_Unconfined},
		{name: "container Unconfined with seccompDefault", container: un, seccompDefault: true, want: runtimeapi.SecurityProfile_Unconfined},
		{name: "container Localhost", container: lh, seccompDefault: true, want: runtimeapi.SecurityProfile_Localhost, ref: "/root/seccomp/audit.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := plantest.BasePod()
			if tc.pod != nil {
				pod.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: tc.pod}
			}
			c := &pod.Spec.Containers[0]
			if tc.container != nil {
				c.SecurityContext = &corev1.SecurityContext{SeccompProfile: tc.container}
			}
			sc := containerSecurityContext(pod, c, Options{RootDir: "/root", SeccompDefault: tc.seccompDefault})
			if got := sc.GetSeccomp(); got.GetProfileType() != tc.want || got.GetLocalhostRef() != tc.ref {
				t.Errorf("seccomp %v %q, want %v %q", got.GetProfileType(), got.GetLocalhostRef(), tc.want, tc.ref)
			}
		})
	}
}
