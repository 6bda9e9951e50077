package criconfig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/engine/plan/plantest"
)

// TestEnvFromPrefixes: envFrom's variables with the prefixes of the e2e
// tests "ConfigMap/Secrets should be consumable as environment variable
// names with various prefixes" [Conformance]: any printable ASCII but
// '=' makes a name (RelaxedEnvironmentVariableValidation, GA in v1.34),
// so "1-data-1" and "$_-data-1" reach the container; a key that cannot
// name a variable (with '=') does not.
func TestEnvFromPrefixes(t *testing.T) {
	pod := plantest.BasePod()
	c := &pod.Spec.Containers[0]
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: pod.Namespace},
		Data: map[string]string{"data-1": "value-1", "a=b": "never"}}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: pod.Namespace},
		Data: map[string][]byte{"data-2": []byte("value-2")}}
	ref := func(prefix string) corev1.EnvFromSource {
		return corev1.EnvFromSource{Prefix: prefix, ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}
	}
	c.EnvFrom = []corev1.EnvFromSource{ref(""), ref("p_"), ref("1-"), ref("$_-"), ref("#@!"),
		{Prefix: "-", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}
	vars, err := makeEnvironment(ContainerConfigInput{Pod: pod, Container: c, ConfigMaps: []*corev1.ConfigMap{cm}, Secrets: []*corev1.Secret{s}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vars {
		got[v.Name] = v.Value
	}
	want := map[string]string{"data-1": "value-1", "p_data-1": "value-1", "1-data-1": "value-1",
		"$_-data-1": "value-1", "#@!data-1": "value-1", "-data-2": "value-2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}
