package criconfig

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/podsync/podsync/engine/criconfig/expansion"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
)

// expand is the Kubernetes $(VAR) expansion (third_party/forked/golang/
// expansion): $(NAME) is replaced by vars[NAME], an unknown reference is
// left as written, and $$ is an escaped $.
func expand(input string, vars map[string]string) string {
	return expansion.Expand(input, vars)
}

// makeEnvironment is the kubelet's makeEnvironmentVariables: envFrom
// sources, then env with $(VAR) expansion against the variables defined
// before it, downward-API fieldRef and resourceFieldRef values, and
// configMapKeyRef and secretKeyRef values from in.ConfigMaps and
// in.Secrets. podsync has no services, so no service links are added.
//
// NOTE(podsync): the kubelet returns the variables in map order; podsync
// keeps the order of definition (envFrom sources in order with keys
// sorted, then env), a variable defined again keeping its first place.
func makeEnvironment(in ContainerConfigInput, opts Options) ([]corev1.EnvVar, error) {
	pod, c := in.Pod, in.Container
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			ref := from.ConfigMapRef
			cm := FindConfigMap(in.ConfigMaps, pod.Namespace, ref.Name)
			if cm == nil {
				if ref.Optional != nil && *ref.Optional {
					continue
				}
				return nil, fmt.Errorf("configmap %s/%s: %w", pod.Namespace, ref.Name, errdefs.ErrNotFound)
			}
			data = cm.Data
		case from.SecretRef != nil:
			ref := from.SecretRef
			s := FindSecret(in.Secrets, pod.Namespace, ref.Name)
			if s == nil {
				if ref.Optional != nil && *ref.Optional {
					continue
				}
				return nil, fmt.Errorf("secret %s/%s: %w", pod.Namespace, ref.Name, errdefs.ErrNotFound)
			}
			data = make(map[string]string, len(s.Data))
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			name := from.Prefix + k
			// Any printable ASCII but '=' names a variable, as the API
			// server allows since v1.34 (RelaxedEnvironmentVariableValidation);
			// a key outside that cannot be a variable, and is skipped.
			if len(validation.IsRelaxedEnvVarName(name)) != 0 {
				continue
			}
			set(name, data[k])
		}
	}
	for _, e := range c.Env {
		val := e.Value
		switch from := e.ValueFrom; {
		case val != "":
			val = expand(val, vars)
		case from == nil:
		case from.FieldRef != nil:
			v, err := fieldRefValue(pod, from.FieldRef.FieldPath, in.PodIPs, opts)
			if err != nil {
				return nil, err
			}
			val = v
		case from.ResourceFieldRef != nil:
			v, err := ResourceFieldValue(pod, c, from.ResourceFieldRef, envAllocatable(pod, opts.NodeAllocatable))
			if err != nil {
				return nil, err
			}
			val = v
		case from.ConfigMapKeyRef != nil:
			ref := from.ConfigMapKeyRef
			optional := ref.Optional != nil && *ref.Optional
			cm := FindConfigMap(in.ConfigMaps, pod.Namespace, ref.Name)
			if cm == nil {
				if optional {
					continue
				}
				return nil, fmt.Errorf("configmap %s/%s: %w", pod.Namespace, ref.Name, errdefs.ErrNotFound)
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s: %w", ref.Key, pod.Namespace, ref.Name, errdefs.ErrNotFound)
			}
			val = v
		case from.SecretKeyRef != nil:
			ref := from.SecretKeyRef
			optional := ref.Optional != nil && *ref.Optional
			s := FindSecret(in.Secrets, pod.Namespace, ref.Name)
			if s == nil {
				if optional {
					continue
				}
				return nil, fmt.Errorf("secret %s/%s: %w", pod.Namespace, ref.Name, errdefs.ErrNotFound)
			}
			v, ok := s.Data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in Secret %s/%s: %w", ref.Key, pod.Namespace, ref.Name, errdefs.ErrNotFound)
			}
			val = string(v)
		default:
			return nil, fmt.Errorf("env %q: unsupported valueFrom: %w", e.Name, errdefs.ErrInvalidSpec)
		}
		set(e.Name, val)
	}
	out := make([]corev1.EnvVar, len(order))
	for i, k := range order {
		out[i] = corev1.EnvVar{Name: k, Value: vars[k]}
	}
	return out, nil
}

// FindConfigMap returns the ConfigMap ns/name of cms, or nil.
func FindConfigMap(cms []*corev1.ConfigMap, ns, name string) *corev1.ConfigMap {
	for _, cm := range cms {
		if cm != nil && cm.Name == name && (cm.Namespace == ns || cm.Namespace == "") {
			return cm
		}
	}
	return nil
}

// FindSecret returns the Secret ns/name of ss, or nil.
func FindSecret(ss []*corev1.Secret, ns, name string) *corev1.Secret {
	for _, s := range ss {
		if s != nil && s.Name == name && (s.Namespace == ns || s.Namespace == "") {
			return s
		}
	}
	return nil
}

// fieldRefValue is the kubelet's podFieldSelectorRuntimeValue with
// fieldpath.ExtractFieldPathAsString.
func fieldRefValue(pod *corev1.Pod, fieldPath string, podIPs []string, opts Options) (string, error) {
	switch fieldPath {
	case "spec.nodeName":
		if pod.Spec.NodeName != "" {
			return pod.Spec.NodeName, nil
		}
		return opts.NodeName, nil
	case "spec.serviceAccountName":
		// An API server's ServiceAccount admission names "default" for a
		// pod that names none; podsync has no admission plugin to.
		if pod.Spec.ServiceAccountName == "" {
			return "default", nil
		}
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		if len(opts.NodeIPs) == 0 {
			return "", nil
		}
		return opts.NodeIPs[0], nil
	case "status.hostIPs":
		return strings.Join(opts.NodeIPs, ","), nil
	case "status.podIP":
		if pod.Spec.HostNetwork {
			podIPs = opts.NodeIPs
		}
		if len(podIPs) == 0 {
			return "", nil
		}
		return podIPs[0], nil
	case "status.podIPs":
		if pod.Spec.HostNetwork {
			podIPs = opts.NodeIPs
		}
		return strings.Join(podIPs, ","), nil
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	for _, p := range []struct {
		prefix string
		m      map[string]string
	}{{"metadata.labels", pod.Labels}, {"metadata.annotations", pod.Annotations}} {
		if rest, ok := strings.CutPrefix(fieldPath, p.prefix+"['"); ok {
			if key, ok := strings.CutSuffix(rest, "']"); ok {
				return p.m[key], nil
			}
		}
	}
	return "", fmt.Errorf("unsupported fieldPath %q: %w", fieldPath, errdefs.ErrInvalidSpec)
}

// formatMap is the kubelet's fieldpath.FormatMap.
func formatMap(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%v=%q\n", k, m[k])
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// envAllocatable is the allocatable an env resourceFieldRef's unset
// limits are taken from (the kubelet's defaultPodLimitsForDownwardAPI,
// PodLevelResources): the node's, with the pod-level limits of the
// resources pod-level resources support (cpu, memory) in place of the
// node's. downwardAPI volume files keep the node's, as the kubelet's
// volume plugin does.
func envAllocatable(pod *corev1.Pod, allocatable corev1.ResourceList) corev1.ResourceList {
	if !resourcehelper.IsPodLevelLimitsSet(pod) {
		return allocatable
	}
	out := allocatable.DeepCopy()
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if !resourcehelper.IsSupportedPodLevelResource(name) {
			continue
		}
		if q, ok := pod.Spec.Resources.Limits[name]; ok && !q.IsZero() {
			if _, ok := out[name]; ok {
				out[name] = q.DeepCopy()
			}
		}
	}
	return out
}

// ResourceFieldValue is the kubelet's resourceFieldRef value, for env
// (containerResourceRuntimeValue after defaultPodLimitsForDownwardAPI)
// and downwardAPI volume files alike
// (ExtractResourceValueByContainerNameAndNodeAllocatable): the resource of
// ref's container — c when ref names none — with its unset or zero cpu,
// memory and ephemeral-storage limits taken from the node's allocatable,
// divided by ref's divisor (default 1) and rounded up. cpu is counted in
// millicores against the divisor's. A container or resource the pod does
// not have is an error wrapping ErrInvalidSpec.
func ResourceFieldValue(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	target := c
	if ref.ContainerName != "" || c == nil {
		target = model.SpecContainer(pod, ref.ContainerName)
		if target == nil {
			return "", fmt.Errorf("resourceFieldRef: container %q not found: %w", ref.ContainerName, errdefs.ErrInvalidSpec)
		}
	}
	limits := maps.Clone(target.Resources.Limits)
	if limits == nil {
		limits = corev1.ResourceList{}
	}
	// Hugepages are never overcommitted, so they are not defaulted.
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := limits[name]; !ok || q.IsZero() {
			if a, ok := allocatable[name]; ok {
				limits[name] = a.DeepCopy()
			}
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, _ := strings.Cut(ref.Resource, ".")
	list := map[string]corev1.ResourceList{"limits": limits, "requests": target.Resources.Requests}[kind]
	rn := corev1.ResourceName(name)
	switch {
	case list == nil && kind != "requests":
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q: %w", ref.Resource, errdefs.ErrInvalidSpec)
	case rn == corev1.ResourceCPU:
		q := list[rn]
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	case rn == corev1.ResourceMemory, rn == corev1.ResourceEphemeralStorage, strings.HasPrefix(name, corev1.ResourceHugePagesPrefix):
		q := list[rn]
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	return "", fmt.Errorf("resourceFieldRef: unsupported resource %q: %w", ref.Resource, errdefs.ErrInvalidSpec)
}
