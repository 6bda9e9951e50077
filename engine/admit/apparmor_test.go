package admit

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestAppArmorAdmission ports the kubelet's AppArmor admit handler cases
// (pkg/security/apparmor validate_test.go): a profile other than
// Unconfined needs AppArmor on the host, a Localhost profile a name.
func TestAppArmorAdmission(t *testing.T) {
	profile := func(typ corev1.AppArmorProfileType, name *string) func(*corev1.Pod) {
		return withSecurityContext(corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: typ, LocalhostProfile: name}})
	}
	annotation := func(v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "c": v}
		}
	}
	tests := []struct {
		name     string
		mutate   func(*corev1.Pod)
		apparmor bool
		want     bool
	}{
		{"no profile, no AppArmor", func(*corev1.Pod) {}, false, true},
		{"Unconfined needs nothing", profile(corev1.AppArmorProfileTypeUnconfined, nil), false, true},
		{"RuntimeDefault without AppArmor", profile(corev1.AppArmorProfileTypeRuntimeDefault, nil), false, false},
		{"RuntimeDefault with AppArmor", profile(corev1.AppArmorProfileTypeRuntimeDefault, nil), true, true},
		{"pod-level Localhost without AppArmor", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("p")}}
		}, false, false},
		{"Localhost with a name", profile(corev1.AppArmorProfileTypeLocalhost, ptr.To("my-profile")), true, true},
		{"Localhost with an empty name", profile(corev1.AppArmorProfileTypeLocalhost, ptr.To(" ")), true, false},
		{"annotation runtime/default without AppArmor", annotation("runtime/default"), false, false},
		{"annotation unconfined without AppArmor", annotation("unconfined"), false, true},
		{"annotation localhost/ with AppArmor", annotation("localhost/"), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod("a", nil)
			tt.mutate(p)
			got := Admit(p, nil, Node{AppArmor: tt.apparmor}, Policy{Level: "privileged"})
			if got.Admit != tt.want || (!tt.want && got.Reason != ReasonAppArmor) {
				t.Errorf("Admit = %+v, want admit %v (else reason %s)", got, tt.want, ReasonAppArmor)
			}
			if !tt.want && !tt.apparmor && got.Message != "Cannot enforce AppArmor: AppArmor is not enabled on the host" {
				t.Errorf("message %q, want the kubelet's", got.Message)
			}
		})
	}
}
