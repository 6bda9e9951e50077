package validation_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/validation"
)

func TestValidateConfigMap(t *testing.T) {
	for _, tt := range []struct {
		name   string
		lim    validation.Limits
		mutate func(cm *corev1.ConfigMap)
		want   []string
	}{
		{"base", validation.Limits{}, func(*corev1.ConfigMap) {}, nil},
		{"no namespace is the default one", validation.Limits{}, func(cm *corev1.ConfigMap) { cm.Namespace = "" }, nil},
		{"binaryData", validation.Limits{}, func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"logo.png": {0x89}} }, nil},
		{"key", validation.Limits{}, func(cm *corev1.ConfigMap) { cm.Data["a/b"] = "x" }, []string{"configMaps[0].data[a/b]"}},
		{"key in data and binaryData", validation.Limits{}, func(cm *corev1.ConfigMap) {
			cm.BinaryData = map[string][]byte{"MODE": []byte("x")}
		}, []string{"configMaps[0].binaryData[MODE]"}},
		{"kind", validation.Limits{}, func(cm *corev1.ConfigMap) { cm.Kind = "Secret" }, []string{"configMaps[0].kind"}},
		{"apiVersion", validation.Limits{}, func(cm *corev1.ConfigMap) { cm.APIVersion = "v2" }, []string{"configMaps[0].apiVersion"}},
		{"name missing", validation.Limits{}, func(cm *corev1.ConfigMap) { cm.Name = "" }, []string{"configMaps[0].metadata.name"}},
		{"namespace", validation.Limits{}, func(cm *corev1.ConfigMap) { cm.Namespace = "Shop" }, []string{"configMaps[0].metadata.namespace"}},
		{"too large", validation.Limits{MaxConfigMapBytes: 16}, func(*corev1.ConfigMap) {}, []string{"configMaps[0]"}},
		{"at its size", validation.Limits{MaxConfigMapBytes: 45}, func(*corev1.ConfigMap) {}, nil},
		{"a byte over", validation.Limits{MaxConfigMapBytes: 44}, func(*corev1.ConfigMap) {}, []string{"configMaps[0]"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cm := baseConfigMap()
			tt.mutate(cm)
			before := cm.DeepCopy()
			checkPaths(t, validation.ValidateConfigMap(cm, field.NewPath("configMaps").Index(0), validation.Options{Limits: tt.lim}), tt.want)
			if diff := cmp.Diff(before, cm); diff != "" {
				t.Errorf("ConfigMap changed (-before +after):\n%s", diff)
			}
			// Defaulted or not, the same violations.
			convert.DefaultConfigMap(cm)
			checkPaths(t, validation.ValidateConfigMap(cm, field.NewPath("configMaps").Index(0), validation.Options{Limits: tt.lim}), tt.want)
		})
	}
}

func TestValidateSecret(t *testing.T) {
	for _, tt := range []struct {
		name   string
		lim    validation.Limits
		mutate func(s *corev1.Secret)
		want   []string
	}{
		{"base", validation.Limits{}, func(*corev1.Secret) {}, nil},
		{"from stringData", validation.Limits{}, func(s *corev1.Secret) {
			s.Data = nil
			s.StringData = map[string]string{"DB_PASSWORD": "s3cr3t"}
		}, nil},
		{"type", validation.Limits{}, func(s *corev1.Secret) { s.Type = "kubernetes.io/tls" }, nil},
		{"name missing", validation.Limits{}, func(s *corev1.Secret) { s.Name = "" }, []string{"secrets[1].metadata.name"}},
		{"data key", validation.Limits{}, func(s *corev1.Secret) { s.Data["db password"] = nil }, []string{"secrets[1].data[db password]"}},
		{"stringData key", validation.Limits{}, func(s *corev1.Secret) {
			s.StringData = map[string]string{"db password": "x"}
		}, []string{"secrets[1].stringData[db password]"}},
		{"kind", validation.Limits{}, func(s *corev1.Secret) { s.Kind = "ConfigMap" }, []string{"secrets[1].kind"}},
		{"type not a qualified name", validation.Limits{}, func(s *corev1.Secret) { s.Type = "my type" }, []string{"secrets[1].type"}},
		{"too large", validation.Limits{MaxSecretBytes: 8}, func(*corev1.Secret) {}, []string{"secrets[1]"}},
		{"at its size", validation.Limits{MaxSecretBytes: 17}, func(*corev1.Secret) {}, nil},
		{"a byte over", validation.Limits{MaxSecretBytes: 16}, func(*corev1.Secret) {}, []string{"secrets[1]"}},
		// stringData replaces the value of data it shares a key with.
		{"too large with stringData", validation.Limits{MaxSecretBytes: 17}, func(s *corev1.Secret) {
			s.StringData = map[string]string{"DB_PASSWORD": "longer!"}
		}, []string{"secrets[1]"}},
		{"replaced by shorter stringData", validation.Limits{MaxSecretBytes: 12}, func(s *corev1.Secret) {
			s.StringData = map[string]string{"DB_PASSWORD": "x"}
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := baseSecret()
			tt.mutate(s)
			before := s.DeepCopy()
			opts := validation.Options{Limits: tt.lim}
			checkPaths(t, validation.ValidateSecret(s, field.NewPath("secrets").Index(1), opts), tt.want)
			if diff := cmp.Diff(before, s); diff != "" {
				t.Errorf("Secret changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestValidateSecretDefaulted: a defaulted Secret gets the violations of
// the Secret it was, with stringData's keys named under data.
func TestValidateSecretDefaulted(t *testing.T) {
	s := baseSecret()
	s.Namespace = ""
	s.StringData = map[string]string{"db password": "x"}
	p := field.NewPath("secrets").Index(0)
	checkPaths(t, validation.ValidateSecret(s, p, validation.Options{}), []string{"secrets[0].stringData[db password]"})
	convert.DefaultSecret(s)
	checkPaths(t, validation.ValidateSecret(s, p, validation.Options{}), []string{"secrets[0].data[db password]"})
}

// TestObjectTooLargeAtTheRoot: without a path, an object too large is
// reported at the empty path.
func TestObjectTooLargeAtTheRoot(t *testing.T) {
	lim := validation.Limits{MaxConfigMapBytes: 1, MaxSecretBytes: 1}
	checkPaths(t, validation.ValidateConfigMap(baseConfigMap(), nil, validation.Options{Limits: lim}), []string{""})
	checkPaths(t, validation.ValidateSecret(baseSecret(), nil, validation.Options{Limits: lim}), []string{""})
}
