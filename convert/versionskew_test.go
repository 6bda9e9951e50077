package convert_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/validation"
)

const (
	aaKey = corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix
	scKey = corev1.SeccompContainerAnnotationKeyPrefix
	scPod = corev1.SeccompPodAnnotationKey
)

var (
	aaRD    = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
	aaUn    = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	aaLocal = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("test")}
	scRD    = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	scUn    = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
)

// skewPod is a pod with an init container "init" and containers "ctr" and
// "b", the shape of the upstream table's pods.
func skewPod(annotations map[string]string) *corev1.Pod {
	img := "registry.local/busybox:1.37"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Annotations: annotations},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: img}},
			Containers:     []corev1.Container{{Name: "ctr", Image: img}, {Name: "b", Image: img}},
		},
	}
}

// profiles summarises the pod's AppArmor and seccomp fields as
// "<where> <kind>=<type>[:<localhost>]".
func profiles(pod *corev1.Pod) []string {
	var out []string
	add := func(where string, aa *corev1.AppArmorProfile, sc *corev1.SeccompProfile) {
		if aa != nil {
			out = append(out, where+" apparmor="+string(aa.Type)+ptr.Deref(aa.LocalhostProfile, ""))
		}
		if sc != nil {
			out = append(out, where+" seccomp="+string(sc.Type)+ptr.Deref(sc.LocalhostProfile, ""))
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil {
		add("pod", sc.AppArmorProfile, sc.SeccompProfile)
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if sc := c.SecurityContext; sc != nil {
				add(c.Name, sc.AppArmorProfile, sc.SeccompProfile)
			}
		}
	}
	return out
}

// TestLegacyProfileAnnotations ports the API server's
// TestApplyAppArmorVersionSkew (pkg/registry/core/pod/strategy_test.go) and
// the annotation-to-field rows of its TestApplySeccompVersionSkew (v1.19 to
// v1.26) to convert.Default, and checks that validation refuses, at the
// annotation or the field, every annotation Default could not turn into
// the field that applies: invalid values, missing containers and
// disagreements — never accepted and ignored.
func TestLegacyProfileAnnotations(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		mutate      func(*corev1.Pod)
		want        []string // profiles after Default
		wantErrs    []string // paths of ValidatePodMetadata's violations
	}{
		// TestApplyAppArmorVersionSkew.
		{name: "security context nil"},
		{name: "pod field unconfined and no annotation present", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: aaUn}
		}, want: []string{"pod apparmor=Unconfined"}},
		{name: "pod field localhost and no annotation present", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: aaLocal}
		}, want: []string{"pod apparmor=Localhosttest"}},
		{name: "container field RuntimeDefault and no annotation present", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: aaRD}
		}, want: []string{"ctr apparmor=RuntimeDefault"}},
		{name: "container overrides pod profile", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: aaRD}
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: aaUn}
		}, want: []string{"pod apparmor=RuntimeDefault", "ctr apparmor=Unconfined"}},
		{name: "annotation 'unconfined' and no fields present",
			annotations: map[string]string{aaKey + "ctr": "unconfined"},
			want:        []string{"ctr apparmor=Unconfined"}},
		{name: "annotation for non-existent container",
			annotations: map[string]string{aaKey + "foo-bar": "unconfined"},
			wantErrs:    []string{"metadata.annotations[container.apparmor.security.beta.kubernetes.io/foo-bar]"}},
		{name: "annotation 'runtime/default' and pod field unconfined",
			annotations: map[string]string{aaKey + "ctr": "runtime/default"},
			mutate: func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: aaUn}
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{}
			}, want: []string{"pod apparmor=Unconfined", "ctr apparmor=RuntimeDefault"}},
		{name: "multiple containers by annotations",
			annotations: map[string]string{aaKey + "init": "unconfined", aaKey + "ctr": "localhost/test", aaKey + "b": "runtime/default"},
			mutate: func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: aaRD}
			}, want: []string{"pod apparmor=RuntimeDefault", "init apparmor=Unconfined", "ctr apparmor=Localhosttest"}},
		{name: "conflicting field and annotations",
			annotations: map[string]string{aaKey + "ctr": "localhost/test"},
			mutate: func(p *corev1.Pod) {
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: aaRD}
			}, want: []string{"ctr apparmor=RuntimeDefault"},
			wantErrs: []string{"spec.containers[0].securityContext.appArmorProfile.type"}},
		{name: "pod field and matching annotations",
			annotations: map[string]string{aaKey + "ctr": "runtime/default"},
			mutate: func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: aaRD}
			}, want: []string{"pod apparmor=RuntimeDefault"}},
		{name: "annotation overrides pod field",
			annotations: map[string]string{aaKey + "ctr": "unconfined"},
			mutate: func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: aaRD}
			}, want: []string{"pod apparmor=RuntimeDefault", "ctr apparmor=Unconfined"}},
		{name: "localhost annotation and a different localhost field",
			annotations: map[string]string{aaKey + "ctr": "localhost/other"},
			mutate: func(p *corev1.Pod) {
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: aaLocal}
			}, want: []string{"ctr apparmor=Localhosttest"},
			wantErrs: []string{"spec.containers[0].securityContext.appArmorProfile.localhostProfile"}},
		{name: "invalid annotation value",
			annotations: map[string]string{aaKey + "ctr": "bogus"},
			wantErrs:    []string{"metadata.annotations[container.apparmor.security.beta.kubernetes.io/ctr]"}},
		// The API server accepts these and ignores them.
		{name: "empty annotation value",
			annotations: map[string]string{aaKey + "ctr": ""},
			wantErrs:    []string{"metadata.annotations[container.apparmor.security.beta.kubernetes.io/ctr]"}},
		{name: "empty localhost name",
			annotations: map[string]string{aaKey + "ctr": "localhost/"},
			wantErrs:    []string{"metadata.annotations[container.apparmor.security.beta.kubernetes.io/ctr]"}},
		{name: "localhost name padded with whitespace",
			annotations: map[string]string{aaKey + "ctr": "localhost/ test"},
			wantErrs:    []string{"metadata.annotations[container.apparmor.security.beta.kubernetes.io/ctr]"}},

		// TestApplySeccompVersionSkew, annotation to field.
		{name: "seccomp pod annotation runtime/default",
			annotations: map[string]string{scPod: "runtime/default"},
			want:        []string{"pod seccomp=RuntimeDefault"}},
		{name: "seccomp pod annotation docker/default",
			annotations: map[string]string{scPod: "docker/default"},
			want:        []string{"pod seccomp=RuntimeDefault"}},
		{name: "seccomp pod annotation unconfined",
			annotations: map[string]string{scPod: "unconfined"},
			want:        []string{"pod seccomp=Unconfined"}},
		{name: "seccomp pod annotation localhost",
			annotations: map[string]string{scPod: "localhost/profiles/audit.json"},
			want:        []string{"pod seccomp=Localhostprofiles/audit.json"}},
		{name: "seccomp container annotations",
			annotations: map[string]string{scKey + "init": "unconfined", scKey + "ctr": "runtime/default"},
			want:        []string{"init seccomp=Unconfined", "ctr seccomp=RuntimeDefault"}},
		{name: "seccomp pod field and matching annotation",
			annotations: map[string]string{scPod: "runtime/default"},
			mutate: func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: scRD}
			}, want: []string{"pod seccomp=RuntimeDefault"}},
		{name: "seccomp pod field and conflicting annotation",
			annotations: map[string]string{scPod: "unconfined"},
			mutate: func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: scRD}
			}, want: []string{"pod seccomp=RuntimeDefault"},
			wantErrs: []string{"spec.securityContext.seccompProfile.type"}},
		{name: "seccomp container field and conflicting annotation",
			annotations: map[string]string{scKey + "ctr": "runtime/default"},
			mutate: func(p *corev1.Pod) {
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: scUn}
			}, want: []string{"ctr seccomp=Unconfined"},
			wantErrs: []string{"spec.containers[0].securityContext.seccompProfile.type"}},
		{name: "seccomp invalid annotation value",
			annotations: map[string]string{scPod: "bogus"},
			wantErrs:    []string{"metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]"}},
		{name: "seccomp empty localhost name",
			annotations: map[string]string{scKey + "ctr": "localhost/"},
			wantErrs:    []string{"metadata.annotations[container.seccomp.security.alpha.kubernetes.io/ctr]"}},
		{name: "seccomp localhost escaping the profile root",
			annotations: map[string]string{scKey + "ctr": "localhost/../../etc/passwd"},
			want:        []string{"ctr seccomp=Localhost../../etc/passwd"},
			wantErrs:    []string{"metadata.annotations[container.seccomp.security.alpha.kubernetes.io/ctr]"}},
		{name: "seccomp annotation for non-existent container",
			annotations: map[string]string{scKey + "gone": "runtime/default"},
			wantErrs:    []string{"metadata.annotations[container.seccomp.security.alpha.kubernetes.io/gone]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := skewPod(tt.annotations)
			if tt.mutate != nil {
				tt.mutate(pod)
			}
			convert.Default(pod)
			if diff := cmp.Diff(tt.want, profiles(pod)); diff != "" {
				t.Errorf("profiles after Default (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.annotations, pod.Annotations); diff != "" && len(tt.annotations) > 0 {
				t.Errorf("annotations changed (-want +got):\n%s", diff)
			}
			var got []string
			for _, e := range validation.ValidatePodMetadata(pod, nil) {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tt.wantErrs, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s\n%v", diff, validation.ValidatePodMetadata(pod, nil))
			}
		})
	}
}
