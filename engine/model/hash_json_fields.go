package model

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// list writes items as a JSON array, each with write.
func list[T any](e *specEncoder, b []byte, items []T, write func(*specEncoder, []byte, *T) []byte) []byte {
	b = append(b, '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = write(e, b, &items[i])
	}
	return append(b, ']')
}

// genericElem writes v with generic, for list.
func genericElem[T any](e *specEncoder, b []byte, v *T) []byte { return e.generic(b, v) }

func (e *specEncoder) port(b []byte, p *corev1.ContainerPort) []byte {
	b = append(b, '{')
	o := object{}
	if p.Name != "" {
		b = o.key(b, `"name":`)
		b = e.str(b, p.Name)
	}
	if p.HostPort != 0 {
		b = o.key(b, `"hostPort":`)
		b = strconv.AppendInt(b, int64(p.HostPort), 10)
	}
	b = o.key(b, `"containerPort":`)
	b = strconv.AppendInt(b, int64(p.ContainerPort), 10)
	if p.Protocol != "" {
		b = o.key(b, `"protocol":`)
		b = e.str(b, string(p.Protocol))
	}
	if p.HostIP != "" {
		b = o.key(b, `"hostIP":`)
		b = e.str(b, p.HostIP)
	}
	return append(b, '}')
}

func (e *specEncoder) env(b []byte, v *corev1.EnvVar) []byte {
	b = append(b, '{')
	o := object{}
	b = o.key(b, `"name":`)
	b = e.str(b, v.Name)
	if v.Value != "" {
		b = o.key(b, `"value":`)
		b = e.str(b, v.Value)
	}
	if v.ValueFrom != nil {
		b = o.key(b, `"valueFrom":`)
		b = e.envSource(b, v.ValueFrom)
	}
	return append(b, '}')
}

// envSource writes the common single-reference sources (fieldRef,
// configMapKeyRef, secretKeyRef) itself and hands the others to
// encoding/json.
func (e *specEncoder) envSource(b []byte, v *corev1.EnvVarSource) []byte {
	switch {
	case v.FieldRef != nil && *v == corev1.EnvVarSource{FieldRef: v.FieldRef}:
		b = e.raw(b, `{"fieldRef":{`)
		o := object{}
		if v.FieldRef.APIVersion != "" {
			b = o.key(b, `"apiVersion":`)
			b = e.str(b, v.FieldRef.APIVersion)
		}
		b = o.key(b, `"fieldPath":`)
		b = e.str(b, v.FieldRef.FieldPath)
		b = e.raw(b, "}}")
	case v.ConfigMapKeyRef != nil && *v == corev1.EnvVarSource{ConfigMapKeyRef: v.ConfigMapKeyRef}:
		b = e.raw(b, `{"configMapKeyRef":`)
		b = e.keyRef(b, v.ConfigMapKeyRef.Name, v.ConfigMapKeyRef.Key, v.ConfigMapKeyRef.Optional)
		b = e.raw(b, "}")
	case v.SecretKeyRef != nil && *v == corev1.EnvVarSource{SecretKeyRef: v.SecretKeyRef}:
		b = e.raw(b, `{"secretKeyRef":`)
		b = e.keyRef(b, v.SecretKeyRef.Name, v.SecretKeyRef.Key, v.SecretKeyRef.Optional)
		b = e.raw(b, "}")
	default:
		b = e.generic(b, v)
	}
	return b
}

// keyRef writes a ConfigMapKeySelector or a SecretKeySelector, which have
// the same fields.
func (e *specEncoder) keyRef(b []byte, name, key string, optional *bool) []byte {
	b = append(b, '{')
	o := object{}
	if name != "" {
		b = o.key(b, `"name":`)
		b = e.str(b, name)
	}
	b = o.key(b, `"key":`)
	b = e.str(b, key)
	if optional != nil {
		b = o.key(b, `"optional":`)
		b = strconv.AppendBool(b, *optional)
	}
	return append(b, '}')
}

func (e *specEncoder) mount(b []byte, m *corev1.VolumeMount) []byte {
	b = append(b, '{')
	o := object{}
	b = o.key(b, `"name":`)
	b = e.str(b, m.Name)
	if m.ReadOnly {
		b = o.key(b, `"readOnly":`)
		b = e.raw(b, "true")
	}
	if m.RecursiveReadOnly != nil {
		b = o.key(b, `"recursiveReadOnly":`)
		b = e.str(b, string(*m.RecursiveReadOnly))
	}
	b = o.key(b, `"mountPath":`)
	b = e.str(b, m.MountPath)
	if m.SubPath != "" {
		b = o.key(b, `"subPath":`)
		b = e.str(b, m.SubPath)
	}
	if m.MountPropagation != nil {
		b = o.key(b, `"mountPropagation":`)
		b = e.str(b, string(*m.MountPropagation))
	}
	if m.SubPathExpr != "" {
		b = o.key(b, `"subPathExpr":`)
		b = e.str(b, m.SubPathExpr)
	}
	if len(m.BindMountOptions) > 0 {
		b = o.key(b, `"bindMountOptions":`)
		b = e.strs(b, m.BindMountOptions)
	}
	return append(b, '}')
}

// volume writes emptyDir and hostPath volumes itself and hands the others
// to encoding/json.
func (e *specEncoder) volume(b []byte, v *corev1.Volume) []byte {
	switch {
	case v.EmptyDir != nil && v.VolumeSource == corev1.VolumeSource{EmptyDir: v.EmptyDir}:
		start := len(b)
		b = e.raw(b, `{"name":`)
		b = e.str(b, v.Name)
		b = e.raw(b, `,"emptyDir":{`)
		o := object{}
		if v.EmptyDir.Medium != "" {
			b = o.key(b, `"medium":`)
			b = e.str(b, string(v.EmptyDir.Medium))
		}
		if v.EmptyDir.SizeLimit != nil {
			b = o.key(b, `"sizeLimit":`)
			var ok bool
			if b, ok = e.quantity(b, v.EmptyDir.SizeLimit); !ok {
				return e.generic(b[:start], v)
			}
		}
		if v.EmptyDir.Mode != nil {
			b = o.key(b, `"mode":`)
			b = strconv.AppendInt(b, int64(*v.EmptyDir.Mode), 10)
		}
		b = e.raw(b, "}}")
	case v.HostPath != nil && v.VolumeSource == corev1.VolumeSource{HostPath: v.HostPath}:
		b = e.raw(b, `{"name":`)
		b = e.str(b, v.Name)
		b = e.raw(b, `,"hostPath":{"path":`)
		b = e.str(b, v.HostPath.Path)
		if v.HostPath.Type != nil {
			b = e.raw(b, `,"type":`)
			b = e.str(b, string(*v.HostPath.Type))
		}
		b = e.raw(b, "}}")
	default:
		b = e.generic(b, v)
	}
	return b
}

// podSecurityContextEmpty reports whether encoding/json writes p as {}:
// every field of PodSecurityContext is omitempty.
func podSecurityContextEmpty(p *corev1.PodSecurityContext) bool {
	return p.SELinuxOptions == nil && p.WindowsOptions == nil && p.RunAsUser == nil && p.RunAsGroup == nil &&
		p.RunAsNonRoot == nil && len(p.SupplementalGroups) == 0 && p.SupplementalGroupsPolicy == nil &&
		p.FSGroup == nil && len(p.Sysctls) == 0 && p.FSGroupChangePolicy == nil && p.SeccompProfile == nil &&
		p.AppArmorProfile == nil && p.SELinuxChangePolicy == nil
}

// resources appends r, or hands it to encoding/json as a whole if a
// quantity is not plain.
func (e *specEncoder) resources(b []byte, r *corev1.ResourceRequirements) []byte {
	start := len(b)
	b = append(b, '{')
	o := object{}
	ok := true
	if len(r.Limits) > 0 {
		b = o.key(b, `"limits":`)
		b, ok = e.resourceList(b, r.Limits)
	}
	if ok && len(r.Requests) > 0 {
		b = o.key(b, `"requests":`)
		b, ok = e.resourceList(b, r.Requests)
	}
	if !ok {
		b = b[:start]
		return e.genericResources(b, *r)
	}
	if len(r.Claims) > 0 {
		b = o.key(b, `"claims":`)
		b = append(b, '[')
		for i := range r.Claims {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.generic(b, &r.Claims[i])
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// genericResources hands a copy of r to encoding/json (a copy, as r may
// point into a ContainerSpec on the caller's stack).
func (e *specEncoder) genericResources(b []byte, r corev1.ResourceRequirements) []byte {
	return e.generic(b, &r)
}

// wellKnownResources are the resource names most containers request, in
// encoding/json's map key order (sorted).
var wellKnownResources = [...]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceEphemeralStorage, corev1.ResourceMemory}

// resourceList appends a non-empty l with its keys sorted, as
// encoding/json writes maps, and each quantity as its MarshalJSON. It
// returns false if a quantity is not plain.
func (e *specEncoder) resourceList(b []byte, l corev1.ResourceList) ([]byte, bool) {
	// Lists of well-known names only, the common case, need neither
	// iterating the map nor sorting.
	known := 0
	for _, k := range wellKnownResources {
		if _, ok := l[k]; ok {
			known++
		}
	}
	b = append(b, '{')
	if known == len(l) {
		n := 0
		for _, k := range wellKnownResources {
			q, ok := l[k]
			if !ok {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = e.str(b, string(k))
			b = append(b, ':')
			if b, ok = e.quantity(b, &q); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	var arr [8]string
	keys := arr[:0]
	for k := range l {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.str(b, k)
		b = append(b, ':')
		q := l[corev1.ResourceName(k)]
		var ok bool
		if b, ok = e.quantity(b, &q); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// quantity appends q.MarshalJSON() if it is a plain JSON string, which
// encoding/json copies unchanged (it compacts and HTML-escapes a
// Marshaler's output). MarshalJSON is String() quoted: the string q was
// parsed from if ParseQuantity kept it, else the canonical form; String
// on a copy (it caches into its receiver) finds it without allocating in
// the first case.
func (e *specEncoder) quantity(b []byte, q *resource.Quantity) ([]byte, bool) {
	c := *q
	s := c.String()
	if !plainJSONString(s) {
		return b, false
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}
