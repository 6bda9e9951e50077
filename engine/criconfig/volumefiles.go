package criconfig

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/validation"
)

// VolumeFile is one file of a configMap, secret, downwardAPI or projected
// volume: its content and permission bits (the kubelet's FileProjection).
type VolumeFile struct {
	// Data is the file's content.
	Data []byte
	// Mode is the file's mode, such as 0o644.
	Mode int32
}

// VolumeFilesInput is what a volume's files are rendered from.
type VolumeFilesInput struct {
	// Pod is the pod whose volume it is. Required.
	Pod *corev1.Pod
	// ConfigMaps and Secrets are the objects the pod may refer to.
	ConfigMaps []*corev1.ConfigMap
	Secrets    []*corev1.Secret
}

// IsFileVolume reports whether v is a volume of files podsync renders:
// configMap, secret, downwardAPI or projected.
func IsFileVolume(v *corev1.Volume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
}

// VolumeFiles renders the files of a configMap, secret, downwardAPI or
// projected volume, by path relative to the volume, as the kubelet's
// volume plugins collect them (configmap.MakePayload, secret.MakePayload,
// downwardapi.CollectData, the projected plugin's collectData); the
// syncer writes them with its atomic writer. It returns nil for another
// kind of volume, an error wrapping ErrNotFound for a missing ConfigMap,
// Secret or key that is not optional, and ErrInvalidSpec for a source
// podsync cannot serve (a projected serviceAccountToken,
// clusterTrustBundle or podCertificate).
func VolumeFiles(in VolumeFilesInput, v *corev1.Volume, opts Options) (map[string]VolumeFile, error) {
	pod := in.Pod
	switch {
	case v.ConfigMap != nil:
		return configMapFiles(pod, v.ConfigMap.Name, v.ConfigMap.Items, defaultModeOr(v.ConfigMap.DefaultMode), v.ConfigMap.Optional, in.ConfigMaps)
	case v.Secret != nil:
		return secretFiles(pod, v.Secret.SecretName, v.Secret.Items, defaultModeOr(v.Secret.DefaultMode), v.Secret.Optional, in.Secrets)
	case v.DownwardAPI != nil:
		return downwardAPIFiles(pod, v.DownwardAPI.Items, defaultModeOr(v.DownwardAPI.DefaultMode), opts)
	case v.Projected != nil:
		mode := defaultModeOr(v.Projected.DefaultMode)
		out := map[string]VolumeFile{}
		for i, src := range v.Projected.Sources {
			var files map[string]VolumeFile
			var err error
			switch {
			case src.ConfigMap != nil:
				files, err = configMapFiles(pod, src.ConfigMap.Name, src.ConfigMap.Items, mode, src.ConfigMap.Optional, in.ConfigMaps)
			case src.Secret != nil:
				files, err = secretFiles(pod, src.Secret.Name, src.Secret.Items, mode, src.Secret.Optional, in.Secrets)
			case src.DownwardAPI != nil:
				files, err = downwardAPIFiles(pod, src.DownwardAPI.Items, mode, opts)
			default:
				err = fmt.Errorf("source %d: %s: %w", i, validation.NoTokensReason, errdefs.ErrInvalidSpec)
			}
			if err != nil {
				return nil, err
			}
			maps.Copy(out, files)
		}
		return out, nil
	}
	return nil, nil
}

// defaultModeOr is a volume's defaultMode, 0644 when unset (the API
// server's default, which a manifest may lack).
func defaultModeOr(m *int32) int32 {
	if m != nil {
		return *m
	}
	return corev1.ConfigMapVolumeSourceDefaultMode
}

// projectKeys is the kubelet's MakePayload: every key, or the listed
// items, with their modes.
func projectKeys(data map[string][]byte, items []corev1.KeyToPath, mode int32, optional bool, what string) (map[string]VolumeFile, error) {
	out := map[string]VolumeFile{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = VolumeFile{Data: v, Mode: mode}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("configure %s: key %q not found: %w", what, it.Key, errdefs.ErrNotFound)
		}
		m := mode
		if it.Mode != nil {
			m = *it.Mode
		}
		out[filepath.Clean(it.Path)] = VolumeFile{Data: v, Mode: m}
	}
	return out, nil
}

func configMapFiles(pod *corev1.Pod, name string, items []corev1.KeyToPath, mode int32, opt *bool, cms []*corev1.ConfigMap) (map[string]VolumeFile, error) {
	optional := opt != nil && *opt
	cm := FindConfigMap(cms, pod.Namespace, name)
	if cm == nil {
		if optional {
			return map[string]VolumeFile{}, nil
		}
		return nil, fmt.Errorf("configmap %s/%s: %w", pod.Namespace, name, errdefs.ErrNotFound)
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	maps.Copy(data, cm.BinaryData)
	return projectKeys(data, items, mode, optional, "configmap "+pod.Namespace+"/"+name)
}

func secretFiles(pod *corev1.Pod, name string, items []corev1.KeyToPath, mode int32, opt *bool, secrets []*corev1.Secret) (map[string]VolumeFile, error) {
	optional := opt != nil && *opt
	sec := FindSecret(secrets, pod.Namespace, name)
	if sec == nil {
		if optional {
			return map[string]VolumeFile{}, nil
		}
		return nil, fmt.Errorf("secret %s/%s: %w", pod.Namespace, name, errdefs.ErrNotFound)
	}
	data := maps.Clone(sec.Data)
	if data == nil {
		data = map[string][]byte{}
	}
	for k, v := range sec.StringData {
		data[k] = []byte(v)
	}
	return projectKeys(data, items, mode, optional, "secret "+pod.Namespace+"/"+name)
}

// downwardAPIFiles is the kubelet's downwardapi.CollectData: a fieldRef
// file holds fieldpath.ExtractFieldPathAsString's value (metadata.labels
// and metadata.annotations as key="value" lines, sorted), a
// resourceFieldRef file ResourceFieldValue's.
func downwardAPIFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, mode int32, opts Options) (map[string]VolumeFile, error) {
	out := make(map[string]VolumeFile, len(items))
	for _, it := range items {
		f := VolumeFile{Mode: mode}
		if it.Mode != nil {
			f.Mode = *it.Mode
		}
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = volumeFieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			v, err = ResourceFieldValue(pod, nil, it.ResourceFieldRef, opts.NodeAllocatable)
		}
		if err != nil {
			return nil, fmt.Errorf("downwardAPI file %q: %w", it.Path, err)
		}
		f.Data = []byte(v)
		out[filepath.Clean(it.Path)] = f
	}
	return out, nil
}

// volumeFieldValue is fieldpath.ExtractFieldPathAsString, the fields a
// downwardAPI volume file may hold: the pod's metadata.
func volumeFieldValue(pod *corev1.Pod, fieldPath string) (string, error) {
	if !IsVolumeFieldPath(fieldPath) {
		return "", fmt.Errorf("fieldPath %q is not supported in a volume (only metadata fields are): %w", fieldPath, errdefs.ErrInvalidSpec)
	}
	return fieldRefValue(pod, fieldPath, nil, Options{})
}

// IsVolumeFieldPath reports whether a downwardAPI volume file may select
// fieldPath: metadata.name, metadata.namespace, metadata.uid,
// metadata.labels and metadata.annotations, whole or one key.
func IsVolumeFieldPath(fieldPath string) bool {
	switch fieldPath {
	case "metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations":
		return true
	}
	for _, prefix := range []string{"metadata.labels['", "metadata.annotations['"} {
		if len(fieldPath) > len(prefix)+2 && fieldPath[:len(prefix)] == prefix && fieldPath[len(fieldPath)-2:] == "']" {
			return true
		}
	}
	return false
}

// ImageVolumesSupport says whether a runtime, by the name and version its
// CRI Version call gives, mounts image volumes (CRI Mount.Image,
// KEP-4639): containerd from 2.1 and CRI-O from 1.31. For another it
// returns the reason a pod with an image volume is refused.
func ImageVolumesSupport(runtimeName, runtimeVersion string) (bool, string) {
	want := map[string][2]int{"containerd": {2, 1}, "cri-o": {1, 31}}[runtimeName]
	major, minor, ok := majorMinor(runtimeVersion)
	if want != [2]int{} && ok && (major > want[0] || major == want[0] && minor >= want[1]) {
		return true, ""
	}
	return false, fmt.Sprintf("the container runtime (%s %s) does not support image volumes, which need containerd 2.1 or later (or CRI-O 1.31); "+
		"run podsyncd on such a runtime, or copy the image's files into an emptyDir with an init container", runtimeName, runtimeVersion)
}

// majorMinor parses "v2.1.4", "2.1.4-rc.1" or "1.6.20~ds1".
func majorMinor(v string) (int, int, bool) {
	v = strings.TrimPrefix(v, "v")
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return 0, 0, false
	}
	return major, minor, true
}
