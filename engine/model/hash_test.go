package model_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan/plantest"
)

func TestChangedFields(t *testing.T) {
	pod := plantest.BasePod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a"}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}
	old := model.NewContainerSpec(pod, &pod.Spec.Containers[0])

	changed := pod.DeepCopy()
	changed.Spec.Volumes[0].HostPath.Path = "/b"
	changed.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "B", Value: "3"}, {Name: "C", Value: "1"}}
	changed.Spec.Containers[0].VolumeMounts[0].ReadOnly = true
	changed.Spec.Containers[0].Args = []string{"x"}
	got := model.ChangedFields(old, model.NewContainerSpec(changed, &changed.Spec.Containers[0]))
	want := []string{"args", "env[B]", "env[C]", "env[A]", "volumeMounts[/data]", "volumes[data]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ChangedFields mismatch (-want +got):\n%s", diff)
	}
	if got := model.ChangedFields(old, old); got != nil {
		t.Errorf("ChangedFields(same) = %v, want nil", got)
	}
	reordered := pod.DeepCopy()
	reordered.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}}
	if got := model.ChangedFields(old, model.NewContainerSpec(reordered, &reordered.Spec.Containers[0])); !cmp.Equal(got, []string{"env"}) {
		t.Errorf("ChangedFields(reordered env) = %v, want [env]", got)
	}
	if model.ContainerHash(pod, &pod.Spec.Containers[0]) == model.ContainerHash(changed, &changed.Spec.Containers[0]) {
		t.Error("ContainerHash did not change with the spec")
	}
}

// TestChangedFieldsPodNamespaces: shareProcessNamespace true and hostUsers
// false change every container's hash and are named (the runtime sets a
// container's namespaces at creation); their default values, set or not,
// are one spec, so a manifest that spells them out restarts nothing.
func TestChangedFieldsPodNamespaces(t *testing.T) {
	pod := plantest.BasePod()
	c := &pod.Spec.Containers[0]
	old := model.NewContainerSpec(pod, c)
	oldHash := model.ContainerHash(pod, c)
	for _, tt := range []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"shareProcessNamespace false", func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(false) }, nil},
		{"hostUsers true", func(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(true) }, nil},
		{"shareProcessNamespace true", func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(true) }, []string{"shareProcessNamespace"}},
		{"hostUsers false", func(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(false) }, []string{"hostUsers"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := pod.DeepCopy()
			tt.mutate(p)
			nc := &p.Spec.Containers[0]
			if diff := cmp.Diff(tt.want, model.ChangedFields(old, model.NewContainerSpec(p, nc))); diff != "" {
				t.Errorf("ChangedFields (-want +got):\n%s", diff)
			}
			if changed := model.ContainerHash(p, nc) != oldHash; changed != (tt.want != nil) {
				t.Errorf("hash changed = %v, want %v", changed, tt.want != nil)
			}
		})
	}
}

// TestChangedFieldsSecurityProfiles: a changed seccomp, AppArmor or SELinux
// profile or procMount, the container's or the pod's that it inherits,
// changes the container's hash and is named, so the planner restarts the
// container with the new profile (the runtime applies a profile only at
// creation).
func TestChangedFieldsSecurityProfiles(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"container seccompProfile", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, []string{"securityContext"}},
		{"container localhostProfile", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("b.json")}}
		}, []string{"securityContext"}},
		{"container appArmorProfile", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
		}, []string{"securityContext"}},
		{"container seLinuxOptions", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Level: "s0:c1"}}
		}, []string{"securityContext"}},
		{"container procMount", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
		}, []string{"securityContext"}},
		{"pod seccompProfile", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		}, []string{"podSecurityContext"}},
		{"pod appArmorProfile", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}
		}, []string{"podSecurityContext"}},
		{"pod seLinuxOptions", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}
		}, []string{"podSecurityContext"}},
	}
	base := plantest.BasePod()
	base.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("a.json")}}
	old := model.NewContainerSpec(base, &base.Spec.Containers[0])
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := base.DeepCopy()
			tt.mutate(changed)
			c := &changed.Spec.Containers[0]
			if diff := cmp.Diff(tt.want, model.ChangedFields(old, model.NewContainerSpec(changed, c))); diff != "" {
				t.Errorf("ChangedFields (-want +got):\n%s", diff)
			}
			if model.ContainerHash(base, &base.Spec.Containers[0]) == model.ContainerHash(changed, c) {
				t.Error("ContainerHash did not change with the profile")
			}
			if got := model.NewContainerSpec(changed, c).Hash(); got != model.ContainerHash(changed, c) {
				t.Errorf("Hash %s differs from ContainerHash %s", got, model.ContainerHash(changed, c))
			}
		})
	}
}

// TestChangedFieldsContainerFields: a change of a lifecycle hook or stop
// signal, a subPathExpr, a mount propagation or stdin, stdinOnce or tty
// changes the container's hash and is named, so PlanPod says what
// restarts it; a probe change does neither.
func TestChangedFieldsContainerFields(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Container)
		want   []string
	}{
		{"preStop exec to sleep", func(c *corev1.Container) {
			c.Lifecycle.PreStop = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}
		}, []string{"lifecycle.preStop"}},
		{"preStop command", func(c *corev1.Container) { c.Lifecycle.PreStop.Exec.Command = []string{"false"} }, []string{"lifecycle.preStop"}},
		{"postStart httpGet added", func(c *corev1.Container) {
			c.Lifecycle.PostStart = &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80)}}
		}, []string{"lifecycle.postStart"}},
		{"stopSignal", func(c *corev1.Container) { c.Lifecycle.StopSignal = ptr.To(corev1.SIGUSR1) }, []string{"lifecycle.stopSignal"}},
		{"lifecycle removed", func(c *corev1.Container) { c.Lifecycle = nil }, []string{"lifecycle.preStop"}},
		{"subPathExpr", func(c *corev1.Container) { c.VolumeMounts[0].SubPathExpr = "$(POD_NAME)" }, []string{"volumeMounts[/data]"}},
		{"mountPropagation", func(c *corev1.Container) {
			c.VolumeMounts[0].MountPropagation = ptr.To(corev1.MountPropagationHostToContainer)
		}, []string{"volumeMounts[/data]"}},
		{"stdin and tty", func(c *corev1.Container) { c.Stdin, c.TTY = true, true }, []string{"stdin", "tty"}},
		{"stdinOnce", func(c *corev1.Container) { c.StdinOnce = true }, []string{"stdinOnce"}},
	}
	base := plantest.BasePod()
	base.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	base.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	base.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	old := model.NewContainerSpec(base, &base.Spec.Containers[0])
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := base.DeepCopy()
			c := &changed.Spec.Containers[0]
			tt.mutate(c)
			if diff := cmp.Diff(tt.want, model.ChangedFields(old, model.NewContainerSpec(changed, c))); diff != "" {
				t.Errorf("ChangedFields (-want +got):\n%s", diff)
			}
			if model.ContainerHash(base, &base.Spec.Containers[0]) == model.ContainerHash(changed, c) {
				t.Error("ContainerHash did not change with the field")
			}
			if got := model.NewContainerSpec(changed, c).Hash(); got != model.ContainerHash(changed, c) {
				t.Errorf("Hash %s differs from ContainerHash %s", got, model.ContainerHash(changed, c))
			}
		})
	}
	t.Run("probes are not hashed", func(t *testing.T) {
		changed := base.DeepCopy()
		changed.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}}
		if model.ContainerHash(base, &base.Spec.Containers[0]) != model.ContainerHash(changed, &changed.Spec.Containers[0]) {
			t.Error("ContainerHash changed with a grpc probe")
		}
	})
}

// TestChangedFieldsNewVolumeSources: a change in any field of a
// downwardAPI, projected, persistentVolumeClaim or image volume the
// container mounts, or of an env resourceFieldRef, changes its hash and
// is named (volumes[name], env[NAME]), so PlanPod shows it. A change of
// what a downwardAPI file shows (the pod's labels) is not: the files are
// swapped in place.
func TestChangedFieldsNewVolumeSources(t *testing.T) {
	base := func() *corev1.Pod {
		pod := plantest.BasePod()
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: ptr.To[int32](0o644), Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}},
				{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
			}}}},
			{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Items: []corev1.KeyToPath{{Key: "k", Path: "k"}}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Optional: ptr.To(false)}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}},
			}}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{Name: "model", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "model:1", PullPolicy: corev1.PullIfNotPresent}}},
		}
		c := &pod.Spec.Containers[0]
		for _, v := range pod.Spec.Volumes {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/" + v.Name})
		}
		c.Env = []corev1.EnvVar{{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}}
		return pod
	}
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"downwardAPI defaultMode", func(p *corev1.Pod) { p.Spec.Volumes[0].DownwardAPI.DefaultMode = ptr.To[int32](0o600) }, []string{"volumes[info]"}},
		{"downwardAPI item path", func(p *corev1.Pod) { p.Spec.Volumes[0].DownwardAPI.Items[0].Path = "l" }, []string{"volumes[info]"}},
		{"downwardAPI item mode", func(p *corev1.Pod) { p.Spec.Volumes[0].DownwardAPI.Items[0].Mode = ptr.To[int32](0o400) }, []string{"volumes[info]"}},
		{"downwardAPI fieldPath", func(p *corev1.Pod) {
			p.Spec.Volumes[0].DownwardAPI.Items[0].FieldRef.FieldPath = "metadata.annotations"
		}, []string{"volumes[info]"}},
		{"downwardAPI resource divisor", func(p *corev1.Pod) {
			p.Spec.Volumes[0].DownwardAPI.Items[1].ResourceFieldRef.Divisor = resource.MustParse("1")
		}, []string{"volumes[info]"}},
		{"downwardAPI resource", func(p *corev1.Pod) { p.Spec.Volumes[0].DownwardAPI.Items[1].ResourceFieldRef.Resource = "requests.cpu" }, []string{"volumes[info]"}},
		{"projected defaultMode", func(p *corev1.Pod) { p.Spec.Volumes[1].Projected.DefaultMode = ptr.To[int32](0o400) }, []string{"volumes[all]"}},
		{"projected configMap item", func(p *corev1.Pod) { p.Spec.Volumes[1].Projected.Sources[0].ConfigMap.Items[0].Path = "x" }, []string{"volumes[all]"}},
		{"projected secret optional", func(p *corev1.Pod) { p.Spec.Volumes[1].Projected.Sources[1].Secret.Optional = ptr.To(true) }, []string{"volumes[all]"}},
		{"projected downwardAPI", func(p *corev1.Pod) {
			p.Spec.Volumes[1].Projected.Sources[2].DownwardAPI.Items[0].FieldRef.FieldPath = "metadata.uid"
		}, []string{"volumes[all]"}},
		{"claimName", func(p *corev1.Pod) { p.Spec.Volumes[2].PersistentVolumeClaim.ClaimName = "other" }, []string{"volumes[data]"}},
		{"claim readOnly", func(p *corev1.Pod) { p.Spec.Volumes[2].PersistentVolumeClaim.ReadOnly = true }, []string{"volumes[data]"}},
		{"image reference", func(p *corev1.Pod) { p.Spec.Volumes[3].Image.Reference = "model:2" }, []string{"volumes[model]"}},
		{"image pullPolicy", func(p *corev1.Pod) { p.Spec.Volumes[3].Image.PullPolicy = corev1.PullAlways }, []string{"volumes[model]"}},
		{"env resourceFieldRef", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[0].ValueFrom.ResourceFieldRef.Divisor = resource.MustParse("1m")
		}, []string{"env[CPU]"}},
		{"the labels a downwardAPI file shows", func(p *corev1.Pod) { p.Labels = map[string]string{"tier": "gold"} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := base()
			changed := pod.DeepCopy()
			tt.mutate(changed)
			got := model.ChangedFields(model.NewContainerSpec(pod, &pod.Spec.Containers[0]), model.NewContainerSpec(changed, &changed.Spec.Containers[0]))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ChangedFields (-want +got):\n%s", diff)
			}
			if same := model.ContainerHash(pod, &pod.Spec.Containers[0]) == model.ContainerHash(changed, &changed.Spec.Containers[0]); same != (tt.want == nil) {
				t.Errorf("hash unchanged: %v, want %v", same, tt.want == nil)
			}
		})
	}
}
