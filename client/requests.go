package client

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/validation"
)

// RunPodsRequestFromManifests builds a RunPods request from manifests
// (convert.ReadManifests, or convert.Decode): copies of the pods,
// ConfigMaps and Secrets lose what only the API server writes and the
// service account fields podsync does not act on
// (convert.DropServerFields, DropIdentityFields), are defaulted as the
// Kubernetes API server would (convert.Default, DefaultConfigMap,
// DefaultSecret; a pod without a uid gets one derived from its namespace
// and name), checked as podsyncd checks them (convert.ValidateManifests)
// and converted with convert.ManifestsToProto. m is not modified. The
// request waits for RUNNING with the default timeout and best-effort
// admission; set WaitFor, Timeout and AdmissionMode on it as needed.
//
// Every problem is reported at once, in a *convert.ManifestsError; a
// field podsync does not support also puts a *convert.InvalidError in the
// chain. A manifest without pods is an error too.
func RunPodsRequestFromManifests(m *convert.Manifests) (*podsyncv1.RunPodsRequest, error) {
	if m == nil || len(m.Pods) == 0 {
		return nil, errors.New("podsync: manifests hold no pod")
	}
	d := &convert.Manifests{
		Pods:       make([]*corev1.Pod, 0, len(m.Pods)),
		ConfigMaps: make([]*corev1.ConfigMap, 0, len(m.ConfigMaps)),
		Secrets:    make([]*corev1.Secret, 0, len(m.Secrets)),
	}
	for _, p := range m.Pods {
		d.Pods = append(d.Pods, defaultedPod(p))
	}
	for _, cm := range m.ConfigMaps {
		d.ConfigMaps = append(d.ConfigMaps, cm.DeepCopy())
	}
	for _, s := range m.Secrets {
		d.Secrets = append(d.Secrets, s.DeepCopy())
	}
	// Secrets are checked as given, as podsyncd checks them.
	if err := convert.ValidateManifests(d, validation.Options{StoredObjects: true, Limits: validation.ClientLimits()}); err != nil {
		return nil, fmt.Errorf("podsync: %w", err)
	}
	for _, cm := range d.ConfigMaps {
		convert.DefaultConfigMap(cm)
	}
	for _, s := range d.Secrets {
		convert.DefaultSecret(s)
	}
	pods, cms, secrets, err := convert.ManifestsToProto(d)
	if err != nil {
		return nil, fmt.Errorf("podsync: %w", err)
	}
	return &podsyncv1.RunPodsRequest{Pods: pods, ConfigMaps: cms, Secrets: secrets}, nil
}

// SyncPodRequestFromPod builds a SyncPod request from a core/v1 pod and
// the ConfigMaps and Secrets it references, defaulted and converted as
// RunPodsRequestFromManifests does. Its arguments are not modified.
func SyncPodRequestFromPod(pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret) (*podsyncv1.SyncPodRequest, error) {
	p, cms, ss, err := podToProto(pod, configMaps, secrets)
	if err != nil {
		return nil, err
	}
	return &podsyncv1.SyncPodRequest{Pod: p, ConfigMaps: cms, Secrets: ss}, nil
}

// PlanPodRequestFromPod builds a PlanPod request as SyncPodRequestFromPod
// builds a SyncPod request.
func PlanPodRequestFromPod(pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret) (*podsyncv1.PlanPodRequest, error) {
	p, cms, ss, err := podToProto(pod, configMaps, secrets)
	if err != nil {
		return nil, err
	}
	return &podsyncv1.PlanPodRequest{Pod: p, ConfigMaps: cms, Secrets: ss}, nil
}

func podToProto(pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret) (*podsyncv1.Pod, []*podsyncv1.ConfigMap, []*podsyncv1.Secret, error) {
	if pod == nil {
		return nil, nil, nil, errors.New("podsync: no pod")
	}
	req, err := RunPodsRequestFromManifests(&convert.Manifests{Pods: []*corev1.Pod{pod}, ConfigMaps: configMaps, Secrets: secrets})
	if err != nil {
		return nil, nil, nil, err
	}
	return req.GetPods()[0], req.GetConfigMaps(), req.GetSecrets(), nil
}

func defaultedPod(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	convert.DropServerFields(p)
	convert.DropIdentityFields(p)
	convert.Default(p)
	return p
}

// ApplyObjectsRequestFromManifests builds an ApplyObjects request from the
// ConfigMaps and Secrets of manifests (their pods are left out), checked
// and defaulted as RunPodsRequestFromManifests checks and defaults them.
// m is not modified. Manifests without ConfigMaps and Secrets are an
// error.
func ApplyObjectsRequestFromManifests(m *convert.Manifests) (*podsyncv1.ApplyObjectsRequest, error) {
	if m == nil || len(m.ConfigMaps)+len(m.Secrets) == 0 {
		return nil, errors.New("podsync: manifests hold no ConfigMap or Secret")
	}
	d := &convert.Manifests{}
	for _, cm := range m.ConfigMaps {
		d.ConfigMaps = append(d.ConfigMaps, cm.DeepCopy())
	}
	for _, s := range m.Secrets {
		d.Secrets = append(d.Secrets, s.DeepCopy())
	}
	if err := convert.ValidateManifests(d, validation.Options{StoredObjects: true, Limits: validation.ClientLimits()}); err != nil {
		return nil, fmt.Errorf("podsync: %w", err)
	}
	for _, cm := range d.ConfigMaps {
		convert.DefaultConfigMap(cm)
	}
	for _, s := range d.Secrets {
		convert.DefaultSecret(s)
	}
	_, cms, secrets, err := convert.ManifestsToProto(d)
	if err != nil {
		return nil, fmt.Errorf("podsync: %w", err)
	}
	return &podsyncv1.ApplyObjectsRequest{ConfigMaps: cms, Secrets: secrets}, nil
}
