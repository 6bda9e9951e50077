package criconfig_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/plan/plantest"
)

// TestReferencedObjects: of the objects a request carries, a pod keeps
// those it refers to in env, envFrom (init containers too), configMap
// and secret volumes and imagePullSecrets, in its namespace (or with
// none); the others are left out.
func TestReferencedObjects(t *testing.T) {
	pod := plantest.BasePod() // namespace shop
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-cm"}}}},
		{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
		{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-cm"}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-secret"}}},
		}}}},
	}
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init-cm"}}}}}}
	pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "from-secret"}}}}
	pod.Spec.Containers[1].Env = []corev1.EnvVar{
		{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "key-cm"}, Key: "k"}}},
		{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "key-secret"}, Key: "k"}}},
		{Name: "C", Value: "plain"},
	}
	cm := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	sec := func(ns, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	cms := []*corev1.ConfigMap{cm("shop", "vol-cm"), cm("", "init-cm"), cm("shop", "key-cm"), cm("shop", "unused"), cm("other", "vol-cm"), nil, cm("shop", "proj-cm")}
	secrets := []*corev1.Secret{sec("shop", "pull"), sec("shop", "vol-secret"), sec("shop", "from-secret"), sec("", "key-secret"),
		sec("shop", "unused"), sec("other", "pull"), sec("shop", "proj-secret")}
	gotCMs, gotSecrets := criconfig.ReferencedObjects(pod, cms, secrets)
	var names []string
	for _, c := range gotCMs {
		names = append(names, "cm "+c.Namespace+"/"+c.Name)
	}
	for _, s := range gotSecrets {
		names = append(names, "secret "+s.Namespace+"/"+s.Name)
	}
	want := []string{"cm shop/vol-cm", "cm /init-cm", "cm shop/key-cm", "cm shop/proj-cm",
		"secret shop/pull", "secret shop/vol-secret", "secret shop/from-secret", "secret /key-secret", "secret shop/proj-secret"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("referenced objects (-want +got):\n%s", diff)
	}
}
