package criconfig_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/plan/plantest"
)

func files(kv ...any) map[string]criconfig.VolumeFile {
	out := map[string]criconfig.VolumeFile{}
	for i := 0; i < len(kv); i += 3 {
		out[kv[i].(string)] = criconfig.VolumeFile{Data: []byte(kv[i+1].(string)), Mode: int32(kv[i+2].(int))}
	}
	return out
}

// TestVolumeFiles: the files of downwardAPI and projected volumes, as the
// kubelet's plugins collect them: labels and annotations in
// fieldpath.FormatMap's format, resources divided and rounded up with
// limits defaulted to the node's allocatable, modes from the item, the
// volume's defaultMode or 0644.
func TestVolumeFiles(t *testing.T) {
	pod := plantest.BasePod()
	pod.Labels = map[string]string{"app": "web", "tier": "front \"end\""}
	pod.Annotations = map[string]string{"example.com/owner": "team"}
	c := &pod.Spec.Containers[0]
	c.Resources = corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi"), "hugepages-2Mi": resource.MustParse("4Mi")},
	}
	opts := criconfig.Options{NodeAllocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi"), corev1.ResourceCPU: resource.MustParse("4")}}
	field := func(path, fp string) corev1.DownwardAPIVolumeFile {
		return corev1.DownwardAPIVolumeFile{Path: path, FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: fp}}
	}
	res := func(path, r, divisor string) corev1.DownwardAPIVolumeFile {
		f := corev1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: c.Name, Resource: r}}
		if divisor != "" {
			f.ResourceFieldRef.Divisor = resource.MustParse(divisor)
		}
		return f
	}
	cms := []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "cm"}, Data: map[string]string{"a": "1", "b": "2"}}}
	secrets := []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "s"}, Data: map[string][]byte{"token": []byte("t0k")}}}
	tests := []struct {
		name string
		vol  corev1.VolumeSource
		want map[string]criconfig.VolumeFile
		err  error
	}{
		{"downwardAPI fields", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: ptr.To[int32](0o600), Items: []corev1.DownwardAPIVolumeFile{
			field("labels", "metadata.labels"), field("annotations", "metadata.annotations"), field("d/name", "metadata.name"),
			field("app", "metadata.labels['app']"), field("uid", "metadata.uid"),
			{Path: "ns", Mode: ptr.To[int32](0o444), FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
		}}}, files("labels", "app=\"web\"\ntier=\"front \\\"end\\\"\"", 0o600, "annotations", "example.com/owner=\"team\"", 0o600,
			"d/name", pod.Name, 0o600, "app", "web", 0o600, "uid", string(pod.UID), 0o600, "ns", pod.Namespace, 0o444), nil},
		{"downwardAPI resources", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			res("cpu", "limits.cpu", "1m"), res("cpu-cores", "limits.cpu", ""), res("mem-limit", "limits.memory", "1Mi"),
			res("mem-request", "requests.memory", "1Mi"), res("huge", "requests.hugepages-2Mi", "1Mi"), res("eph", "limits.ephemeral-storage", ""),
		}}}, files("cpu", "250", 0o644, "cpu-cores", "1", 0o644, "mem-limit", "2048", 0o644, "mem-request", "100", 0o644, "huge", "4", 0o644, "eph", "0", 0o644), nil},
		{"downwardAPI status field refused", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			field("ip", "status.podIP")}}}, nil, errdefs.ErrInvalidSpec},
		{"projected", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o640), Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Items: []corev1.KeyToPath{{Key: "a", Path: "conf/a", Mode: ptr.To[int32](0o400)}}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{field("labels", "metadata.labels")}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}},
		}}}, files("conf/a", "1", 0o400, "token", "t0k", 0o640, "labels", "app=\"web\"\ntier=\"front \\\"end\\\"\"", 0o640), nil},
		{"projected missing configMap", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}}}}}, nil, errdefs.ErrNotFound},
		{"projected token refused", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}, nil, errdefs.ErrInvalidSpec},
		{"configMap default mode", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
			files("a", "1", 0o644, "b", "2", 0o644), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &corev1.Volume{Name: "v", VolumeSource: tt.vol}
			got, err := criconfig.VolumeFiles(criconfig.VolumeFilesInput{Pod: pod, ConfigMaps: cms, Secrets: secrets}, v, opts)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResourceFieldValueEnv: env's resourceFieldRef without a container
// name is the container's own; with one another's; an unknown container
// or resource is ErrInvalidSpec.
func TestResourceFieldValueEnv(t *testing.T) {
	pod := plantest.BasePod()
	pod.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	alloc := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}
	own, err := criconfig.ResourceFieldValue(pod, &pod.Spec.Containers[0], &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Gi")}, alloc)
	if err != nil || own != "8" {
		t.Errorf("own limit defaulted to allocatable = %q, %v; want 8", own, err)
	}
	other, err := criconfig.ResourceFieldValue(pod, &pod.Spec.Containers[0], &corev1.ResourceFieldSelector{ContainerName: pod.Spec.Containers[1].Name, Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}, alloc)
	if err != nil || other != "1024" {
		t.Errorf("other container's limit = %q, %v; want 1024", other, err)
	}
	for _, ref := range []corev1.ResourceFieldSelector{{ContainerName: "absent", Resource: "limits.cpu"}, {Resource: "limits.gpu"}} {
		if _, err := criconfig.ResourceFieldValue(pod, &pod.Spec.Containers[0], &ref, alloc); !errors.Is(err, errdefs.ErrInvalidSpec) {
			t.Errorf("%+v: %v, want ErrInvalidSpec", ref, err)
		}
	}
}

func TestImageVolumesSupport(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		want          bool
	}{
		{"containerd", "v2.4.2", true}, {"containerd", "2.1.0", true}, {"containerd", "v2.0.5", false},
		{"containerd", "1.6.20~ds1", false}, {"cri-o", "1.31.0", true}, {"cri-o", "1.30.2", false},
		{"fakeRuntime", "0.1.0", false}, {"containerd", "", false},
	} {
		ok, why := criconfig.ImageVolumesSupport(tc.name, tc.version)
		if ok != tc.want || (ok == (why != "")) {
			t.Errorf("%s %s: %v %q, want %v", tc.name, tc.version, ok, why, tc.want)
		}
	}
}

// TestClaimAndImageMounts: a persistentVolumeClaim volume mounts the
// named volume's directory (read-only with the claim's readOnly), an
// image volume the pulled image through CRI Mount.Image, read-only;
// downwardAPI and projected volumes their directories, read-only.
func TestClaimAndImageMounts(t *testing.T) {
	pod := plantest.BasePod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}},
		{Name: "ro", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared", ReadOnly: true}}},
		{Name: "model", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "model:1"}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
		{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
	}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "ro", MountPath: "/ro"}, {Name: "model", MountPath: "/model"},
		{Name: "info", MountPath: "/info"}, {Name: "all", MountPath: "/all"}}
	opts := criconfig.Options{RootDir: "/var/lib/podsync"}
	cfg, err := criconfig.ContainerConfig(criconfig.ContainerConfigInput{Pod: pod, Container: c, ImageVolumes: map[string]string{"model": "sha256:abc"}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	type mnt struct {
		Path, Host, Image string
		RO                bool
	}
	var got []mnt
	for _, m := range cfg.GetMounts()[:5] {
		got = append(got, mnt{m.GetContainerPath(), m.GetHostPath(), m.GetImage().GetImage(), m.GetReadonly()})
	}
	podDir := "/var/lib/podsync/pods/" + string(pod.UID) + "/volumes/"
	want := []mnt{{"/data", "/var/lib/podsync/claims/shop/shared", "", false}, {"/ro", "/var/lib/podsync/claims/shop/shared", "", true},
		{"/model", "", "sha256:abc", true}, {"/info", podDir + "downward-api/info", "", true}, {"/all", podDir + "projected/all", "", true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
}
