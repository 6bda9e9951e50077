package criconfig

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/plan/plantest"
)

// TestStopSignal: lifecycle.stopSignal reaches CRI ContainerConfig as the
// kubelet's signalNameToRuntimeEnum maps it; none leaves the runtime's
// default.
func TestStopSignal(t *testing.T) {
	tests := []struct {
		signal corev1.Signal
		want   runtimeapi.Signal
	}{
		{corev1.SIGTERM, runtimeapi.Signal_SIGNAL_SIGTERM},
		{corev1.SIGUSR1, runtimeapi.Signal_SIGNAL_SIGUSR1},
		{corev1.SIGKILL, runtimeapi.Signal_SIGNAL_SIGKILL},
		{corev1.SIGRTMIN, runtimeapi.Signal_SIGNAL_SIGRTMIN},
		{corev1.SIGRTMINPLUS1, runtimeapi.Signal_SIGNAL_SIGRTMINPLUS1},
		{corev1.SIGRTMAXMINUS14, runtimeapi.Signal_SIGNAL_SIGRTMAXMINUS14},
		{corev1.SIGRTMAX, runtimeapi.Signal_SIGNAL_SIGRTMAX},
	}
	for _, tt := range tests {
		pod := plantest.BasePod()
		c := &pod.Spec.Containers[0]
		c.Lifecycle = &corev1.Lifecycle{StopSignal: ptr.To(tt.signal)}
		cfg, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: c}, Options{})
		if err != nil {
			t.Fatalf("%s: %v", tt.signal, err)
		}
		if cfg.StopSignal != tt.want {
			t.Errorf("%s: StopSignal = %s, want %s", tt.signal, cfg.StopSignal, tt.want)
		}
	}
	pod := plantest.BasePod()
	cfg, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: &pod.Spec.Containers[0]}, Options{})
	if err != nil || cfg.StopSignal != runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		t.Errorf("no stopSignal: %v, %v; want the runtime's default", cfg.GetStopSignal(), err)
	}
	for _, bad := range []corev1.Signal{"SIGFOO", "RUNTIME_DEFAULT", "TERM", ""} {
		pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{StopSignal: ptr.To(bad)}
		if _, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: &pod.Spec.Containers[0]}, Options{}); !errors.Is(err, errdefs.ErrInvalidSpec) {
			t.Errorf("stopSignal %q: error = %v, want ErrInvalidSpec", bad, err)
		}
	}
}

// TestSubPathExpr is the kubelet's ExpandContainerVolumeMounts and
// makeMounts checks: $(VAR) from the container's env (the downward API
// included), a variable unset or empty is an error naming it, and an
// expansion that is absolute or climbs with ".." is refused.
func TestSubPathExpr(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		env     []corev1.EnvVar
		want    string // the host path's suffix below the volume
		wantErr string
	}{
		{name: "pod name", expr: "$(POD_NAME)", want: "/web"},
		{name: "nested", expr: "logs/$(POD_NAME)/$(MODE)", env: []corev1.EnvVar{{Name: "MODE", Value: "fast"}}, want: "/logs/web/fast"},
		{name: "escaped", expr: "$$(POD_NAME)", want: "/$(POD_NAME)"},
		{name: "from an earlier var", expr: "$(DIR)", env: []corev1.EnvVar{{Name: "DIR", Value: "$(POD_NAME)-x"}}, want: "/web-x"},
		{name: "unset", expr: "$(NOPE)/$(ALSO)", wantErr: "missing value for ALSO, NOPE"},
		{name: "empty", expr: "$(EMPTY)", env: []corev1.EnvVar{{Name: "EMPTY"}}, wantErr: "missing value for EMPTY"},
		{name: "absolute", expr: "$(ABS)", env: []corev1.EnvVar{{Name: "ABS", Value: "/etc"}}, wantErr: `expands to "/etc"`},
		{name: "climbing", expr: "$(UP)/x", env: []corev1.EnvVar{{Name: "UP", Value: ".."}}, wantErr: `expands to "../x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := plantest.BasePod()
			pod.Name = "web"
			pod.Spec.Volumes = []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			c := &pod.Spec.Containers[0]
			c.Env = append([]corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}, tt.env...)
			c.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/logs", SubPathExpr: tt.expr,
				MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)}}
			cfg, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: c}, Options{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errdefs.ErrInvalidSpec) ||
					errors.Is(err, ErrSubPathExprUnset) != strings.HasPrefix(tt.wantErr, "missing value") {
					t.Fatalf("error = %v, want ErrInvalidSpec with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := cfg.Mounts[0]
			if want := VolumeDir(pod, VolumePluginEmptyDir, "logs", Options{}.WithDefaults()) + tt.want; m.HostPath != want {
				t.Errorf("host path = %s, want %s", m.HostPath, want)
			}
			if m.Propagation != runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER {
				t.Errorf("propagation = %s, want HOST_TO_CONTAINER", m.Propagation)
			}
		})
	}
}

// TestMountPropagation is the kubelet's translateMountPropagation.
func TestMountPropagation(t *testing.T) {
	for mode, want := range map[string]runtimeapi.MountPropagation{
		"":                                  runtimeapi.MountPropagation_PROPAGATION_PRIVATE,
		string(corev1.MountPropagationNone): runtimeapi.MountPropagation_PROPAGATION_PRIVATE,
		string(corev1.MountPropagationHostToContainer): runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER,
		string(corev1.MountPropagationBidirectional):   runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL,
	} {
		pod := plantest.BasePod()
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		c := &pod.Spec.Containers[0]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		if mode != "" {
			c.VolumeMounts[0].MountPropagation = ptr.To(corev1.MountPropagationMode(mode))
		}
		cfg, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: c}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Mounts[0].Propagation; got != want {
			t.Errorf("mountPropagation %q: %s, want %s", mode, got, want)
		}
	}
	pod := plantest.BasePod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", MountPropagation: ptr.To(corev1.MountPropagationMode("Shared"))}}
	if _, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: c}, Options{}); !errors.Is(err, errdefs.ErrInvalidSpec) {
		t.Errorf("mountPropagation Shared: error = %v, want ErrInvalidSpec", err)
	}
}
