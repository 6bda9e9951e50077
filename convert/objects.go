package convert

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// ConfigMapToProto converts a core/v1 ConfigMap. A field podsync does not
// support is reported in an *InvalidError.
func ConfigMapToProto(cm *corev1.ConfigMap) (*podsyncv1.ConfigMap, error) {
	if cm == nil {
		return nil, nil
	}
	out := &podsyncv1.ConfigMap{
		ApiVersion: cm.APIVersion,
		Kind:       cm.Kind,
		Metadata:   objectMetaToProto(&cm.ObjectMeta),
		Data:       cm.Data,
		BinaryData: cm.BinaryData,
		Immutable:  cm.Immutable,
	}
	if errs := unsupportedFields(cm, ConfigMapFromProto(out)); len(errs) > 0 {
		return nil, &InvalidError{Kind: "ConfigMap", Name: cm.Name, Errors: errs}
	}
	return out, nil
}

// ConfigMapFromProto converts the API's ConfigMap to core/v1.
func ConfigMapFromProto(in *podsyncv1.ConfigMap) *corev1.ConfigMap {
	if in == nil {
		return nil
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: in.ApiVersion, Kind: in.Kind},
		ObjectMeta: objectMetaFromProto(in.Metadata),
		Data:       in.Data,
		BinaryData: in.BinaryData,
		Immutable:  in.Immutable,
	}
}

// SecretToProto converts a core/v1 Secret. A field podsync does not
// support is reported in an *InvalidError.
func SecretToProto(s *corev1.Secret) (*podsyncv1.Secret, error) {
	if s == nil {
		return nil, nil
	}
	out := &podsyncv1.Secret{
		ApiVersion: s.APIVersion,
		Kind:       s.Kind,
		Metadata:   objectMetaToProto(&s.ObjectMeta),
		Data:       s.Data,
		StringData: s.StringData,
		Type:       string(s.Type),
		Immutable:  s.Immutable,
	}
	if errs := unsupportedFields(s, SecretFromProto(out)); len(errs) > 0 {
		return nil, &InvalidError{Kind: "Secret", Name: s.Name, Errors: errs}
	}
	return out, nil
}

// SecretFromProto converts the API's Secret to core/v1.
func SecretFromProto(in *podsyncv1.Secret) *corev1.Secret {
	if in == nil {
		return nil
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: in.ApiVersion, Kind: in.Kind},
		ObjectMeta: objectMetaFromProto(in.Metadata),
		Data:       in.Data,
		StringData: in.StringData,
		Type:       corev1.SecretType(in.Type),
		Immutable:  in.Immutable,
	}
}

// ManifestsToProto converts decoded manifests, reporting every object's
// unsupported fields at once (errors.Join of *InvalidError).
func ManifestsToProto(m *Manifests) (pods []*podsyncv1.Pod, cms []*podsyncv1.ConfigMap, secrets []*podsyncv1.Secret, err error) {
	var errs []error
	for _, p := range m.Pods {
		out, err := PodToProto(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pods = append(pods, out)
	}
	for _, c := range m.ConfigMaps {
		out, err := ConfigMapToProto(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cms = append(cms, out)
	}
	for _, s := range m.Secrets {
		out, err := SecretToProto(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		secrets = append(secrets, out)
	}
	if len(errs) > 0 {
		return nil, nil, nil, fmt.Errorf("convert manifests: %w", errors.Join(errs...))
	}
	return pods, cms, secrets, nil
}
