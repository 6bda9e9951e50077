package criconfig

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/plan/plantest"
)

var cmpProto = protocmp.Transform()

const testSeccompRoot = "/var/lib/podsync/seccomp"

var (
	unconfinedProfile     = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	runtimeDefaultProfile = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
)

func localhostRef(name string) *runtimeapi.SecurityProfile {
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: testSeccompRoot + "/" + name}
}

// seccompCase is a row of the kubelet's TestGetSeccompProfile and
// TestGetSeccompProfileDefaultSeccomp (pkg/kubelet/kuberuntime
// helpers_linux_test.go).
type seccompCase struct {
	description string
	podSc       *corev1.PodSecurityContext
	containerSc *corev1.SecurityContext
	want        *runtimeapi.SecurityProfile
	wantErr     bool
}

// kubeletSeccompCases are the rows the two kubelet tables share; none is
// the profile of a container and pod that name none, which differs.
func kubeletSeccompCases() []seccompCase {
	return []seccompCase{
		{description: "pod seccomp profile set to unconfined returns unconfined",
			podSc: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}},
			want:  unconfinedProfile},
		{description: "container seccomp profile set to unconfined returns unconfined",
			containerSc: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}},
			want:        unconfinedProfile},
		{description: "pod seccomp profile set to SeccompProfileTypeRuntimeDefault returns runtime/default",
			podSc: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			want:  runtimeDefaultProfile},
		{description: "container seccomp profile set to SeccompProfileTypeRuntimeDefault returns runtime/default",
			containerSc: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			want:        runtimeDefaultProfile},
		{description: "pod seccomp profile set to SeccompProfileTypeLocalhost returns 'localhost/' + LocalhostProfile",
			podSc: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("filename")}},
			want:  localhostRef("filename")},
		{description: "pod seccomp profile set to SeccompProfileTypeLocalhost with empty LocalhostProfile returns error",
			podSc:   &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}},
			wantErr: true},
		{description: "container seccomp profile set to SeccompProfileTypeLocalhost with empty LocalhostProfile returns error",
			containerSc: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}},
			wantErr:     true},
		{description: "container seccomp profile set to SeccompProfileTypeLocalhost returns 'localhost/' + LocalhostProfile",
			containerSc: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("filename2")}},
			want:        localhostRef("filename2")},
		{description: "prioritise container field over pod field",
			podSc:       &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}},
			containerSc: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			want:        runtimeDefaultProfile},
		{description: "prioritise container localhost field over pod localhost field",
			podSc:       &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("field-pod-profile.json")}},
			containerSc: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("field-cont-profile.json")}},
			want:        localhostRef("field-cont-profile.json")},

		// podsync: a Localhost profile stays below the profile root.
		{description: "localhost profile in a subdirectory",
			containerSc: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/audit.json")}},
			want:        localhostRef("profiles/audit.json")},
		{description: "localhost profile escaping with ..",
			containerSc: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("../../../etc/seccomp.json")}},
			wantErr:     true},
		{description: "localhost profile escaping from a subdirectory",
			podSc:   &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/../../x.json")}},
			wantErr: true},
		{description: "absolute localhost profile",
			containerSc: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("/etc/seccomp.json")}},
			wantErr:     true},
	}
}

func runSeccompCases(t *testing.T, seccompDefault bool, cases []seccompCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.description, func(t *testing.T) {
			pod := plantest.BasePod()
			pod.Spec.SecurityContext = tc.podSc
			c := &pod.Spec.Containers[0]
			c.SecurityContext = tc.containerSc
			opts := Options{SeccompDefault: seccompDefault}
			got, err := seccompProfile(pod.Spec.SecurityContext, c.SecurityContext, opts.WithDefaults())
			if tc.wantErr {
				if !errors.Is(err, errdefs.ErrInvalidSpec) {
					t.Fatalf("err = %v, want ErrInvalidSpec", err)
				}
				// The container's config fails the same way, which the
				// syncer reports as CreateContainerConfigError.
				if _, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: c}, opts); !errors.Is(err, errdefs.ErrInvalidSpec) {
					t.Errorf("ContainerConfig err = %v, want ErrInvalidSpec", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpProto); diff != "" {
				t.Errorf("profile (-want +got):\n%s", diff)
			}
			sc, err := containerSecurityContext(pod, c, opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, sc.GetSeccomp(), cmpProto); diff != "" {
				t.Errorf("security context's profile (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGetSeccompProfile is the kubelet's TestGetSeccompProfile: without
// --seccomp-default a pod and container that name no profile are
// Unconfined.
func TestGetSeccompProfile(t *testing.T) {
	runSeccompCases(t, false, append([]seccompCase{
		{description: "no seccomp should return unconfined", want: unconfinedProfile},
	}, kubeletSeccompCases()...))
}

// TestGetSeccompProfileDefaultSeccomp is the kubelet's
// TestGetSeccompProfileDefaultSeccomp: with --seccomp-default they are
// RuntimeDefault, and an explicit Unconfined stays Unconfined.
func TestGetSeccompProfileDefaultSeccomp(t *testing.T) {
	runSeccompCases(t, true, append([]seccompCase{
		{description: "no seccomp should return RuntimeDefault", want: runtimeDefaultProfile},
	}, kubeletSeccompCases()...))
}

// TestSeccompProfileRoot: the profile root defaults to <root-dir>/seccomp
// and follows the option.
func TestSeccompProfileRoot(t *testing.T) {
	lh := &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("a.json")}}
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "/var/lib/podsync/seccomp/a.json"},
		{Options{RootDir: "/srv/podsync"}, "/srv/podsync/seccomp/a.json"},
		{Options{RootDir: "/srv/podsync", SeccompProfileRoot: "/etc/podsync/seccomp"}, "/etc/podsync/seccomp/a.json"},
	} {
		got, err := seccompProfile(nil, lh, tc.opts.WithDefaults())
		if err != nil || got.GetLocalhostRef() != tc.want {
			t.Errorf("%+v: %v %q, want %q", tc.opts, err, got.GetLocalhostRef(), tc.want)
		}
	}
}

// TestGetAppArmorProfile is the kubelet's TestGetAppArmorProfile
// (pkg/kubelet/kuberuntime helpers_test.go), plus the precedence of
// apparmor.GetProfile: the container's field, then its legacy annotation,
// then the pod's field.
func TestGetAppArmorProfile(t *testing.T) {
	tests := []struct {
		name               string
		podProfile         *corev1.AppArmorProfile
		containerProfile   *corev1.AppArmorProfile
		annotation         *string
		expectedProfile    *runtimeapi.SecurityProfile
		expectedOldProfile string
		expectError        bool
	}{{
		name:            "no appArmor",
		expectedProfile: nil,
	}, {
		name:               "runtime default",
		podProfile:         &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
		expectedProfile:    &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
		expectedOldProfile: "runtime/default",
	}, {
		name:               "unconfined",
		podProfile:         &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined},
		expectedProfile:    &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
		expectedOldProfile: "unconfined",
	}, {
		name:               "localhost",
		podProfile:         &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("test")},
		expectedProfile:    &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "test"},
		expectedOldProfile: "localhost/test",
	}, {
		name:        "invalid localhost",
		podProfile:  &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost},
		expectError: true,
	}, {
		name:        "invalid type",
		podProfile:  &corev1.AppArmorProfile{Type: "foo"},
		expectError: true,
	}, {
		name:               "container field over pod field",
		podProfile:         &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
		containerProfile:   &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined},
		annotation:         ptr.To("localhost/ann"),
		expectedProfile:    &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
		expectedOldProfile: "unconfined",
	}, {
		name:               "annotation over pod field",
		podProfile:         &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
		annotation:         ptr.To("localhost/ann"),
		expectedProfile:    &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "ann"},
		expectedOldProfile: "localhost/ann",
	}, {
		name:               "unknown annotation falls back to the pod field",
		podProfile:         &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined},
		annotation:         ptr.To("bogus"),
		expectedProfile:    &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
		expectedOldProfile: "unconfined",
	}, {
		name:        "empty localhost annotation",
		annotation:  ptr.To("localhost/"),
		expectError: true,
	}}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			pod := corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "bar"},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{AppArmorProfile: test.podProfile},
					Containers:      []corev1.Container{{Name: "foo"}},
				},
			}
			if test.containerProfile != nil {
				pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: test.containerProfile}
			}
			if test.annotation != nil {
				pod.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "foo": *test.annotation}
			}
			actual, actualOld, err := appArmorProfile(&pod, &pod.Spec.Containers[0])
			if test.expectError != (err != nil) || (err != nil && !errors.Is(err, errdefs.ErrInvalidSpec)) {
				t.Fatalf("err = %v, want an ErrInvalidSpec: %v", err, test.expectError)
			}
			if diff := cmp.Diff(test.expectedProfile, actual, cmpProto); diff != "" {
				t.Errorf("AppArmor profile (-want +got):\n%s", diff)
			}
			if actualOld != test.expectedOldProfile {
				t.Errorf("old (deprecated) profile string %q, want %q", actualOld, test.expectedOldProfile)
			}
			if err != nil {
				return
			}
			sc, err := containerSecurityContext(&pod, &pod.Spec.Containers[0], Options{})
			if err != nil {
				t.Fatal(err)
			}
			old := sc.GetApparmorProfile() //nolint:staticcheck // the deprecated form the kubelet still sets.
			if diff := cmp.Diff(test.expectedProfile, sc.GetApparmor(), cmpProto); diff != "" || old != test.expectedOldProfile {
				t.Errorf("security context's AppArmor %v %q (-want +got):\n%s", sc.GetApparmor(), old, diff)
			}
		})
	}
}

// TestProcMountPaths is the kubelet's ConvertToRuntimeMaskedPaths and
// ConvertToRuntimeReadonlyPaths (pkg/securitycontext util_test.go): unset
// and Default give the default masked and read-only paths, Unmasked none
// (validation refuses Unmasked, which needs a user namespace; the engine
// still converts it as the kubelet does).
func TestProcMountPaths(t *testing.T) {
	for _, tc := range []struct {
		name             string
		procMount        *corev1.ProcMountType
		masked, readonly []string
	}{
		{"unset", nil, defaultMaskedPaths, defaultReadonlyPaths},
		{"Default", ptr.To(corev1.DefaultProcMount), defaultMaskedPaths, defaultReadonlyPaths},
		{"Unmasked", ptr.To(corev1.UnmaskedProcMount), []string{}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := plantest.BasePod()
			c := &pod.Spec.Containers[0]
			c.SecurityContext = &corev1.SecurityContext{ProcMount: tc.procMount}
			sc, err := containerSecurityContext(pod, c, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.masked, sc.MaskedPaths); diff != "" {
				t.Errorf("masked paths (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.readonly, sc.ReadonlyPaths); diff != "" {
				t.Errorf("read-only paths (-want +got):\n%s", diff)
			}
			if sc.MaskedPaths == nil || sc.ReadonlyPaths == nil {
				t.Error("nil paths leave the runtime's own defaults; the kubelet always sends a list")
			}
		})
	}
	if !slices.Contains(defaultMaskedPaths, "/proc/kcore") || !slices.Contains(defaultReadonlyPaths, "/proc/sys") {
		t.Errorf("default paths are not the kubelet's: %v %v", defaultMaskedPaths, defaultReadonlyPaths)
	}
}

// TestSELinuxOptions is the kubelet's convertToRuntimeSELinuxOption and
// DetermineEffectiveSecurityContext: the container's options replace the
// pod's whole, the pod's are the sandbox's and every other container's.
func TestSELinuxOptions(t *testing.T) {
	pod := plantest.BasePod()
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Level: "s0:c1,c2", Type: "pod_t"}}
	pod.Spec.Containers = append(pod.Spec.Containers, *pod.Spec.Containers[0].DeepCopy())
	pod.Spec.Containers[1].Name = "second"
	pod.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{User: "system_u", Role: "system_r"}}
	podOpt := &runtimeapi.SELinuxOption{Level: "s0:c1,c2", Type: "pod_t"}
	if diff := cmp.Diff(podOpt, sandboxLinuxConfig(pod, Options{}).GetSecurityContext().GetSelinuxOptions(), cmpProto); diff != "" {
		t.Errorf("sandbox (-want +got):\n%s", diff)
	}
	for i, want := range []*runtimeapi.SELinuxOption{podOpt, {User: "system_u", Role: "system_r"}} {
		sc, err := containerSecurityContext(pod, &pod.Spec.Containers[i], Options{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, sc.GetSelinuxOptions(), cmpProto); diff != "" {
			t.Errorf("container %d (-want +got):\n%s", i, diff)
		}
	}
}
