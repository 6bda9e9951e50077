package plan

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// specEncoder writes exactly the bytes json.Marshal writes for a
// *ContainerSpec, without encoding/json's reflection for what nearly every
// container has. The hashes recorded in running containers' annotations
// are FNV-64a of json.Marshal's output, so not one byte may differ:
//
//   - strings are escaped by a port of encoding/json's appendString (HTML
//     escaping on, invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped);
//   - the structs written field by field (ContainerSpec, ContainerPort,
//     EnvVar, the fieldRef/configMapKeyRef/secretKeyRef env sources,
//     VolumeMount, ResourceRequirements, emptyDir and hostPath volumes, an
//     empty PodSecurityContext) are pinned by TestSpecEncoderKnowsEveryField,
//     which fails when k8s.io/api adds or retags a field;
//   - resource lists are written with sorted keys, and quantities as their
//     MarshalJSON;
//   - everything else (envFrom, other env sources and volumes, devices,
//     claims, security contexts, a quantity that would need escaping) is
//     handed to encoding/json, writing into the same buffer.
//
// TestSpecEncoderMatchesJSON and FuzzSpecEncoder compare the output with
// json.Marshal; TestContainerHashUnchanged and the golden files pin hash
// values.
type specEncoder struct {
	buf []byte
	// enc is an encoding/json encoder that writes into buf.
	enc *json.Encoder
}

// Write appends p to buf, for enc.
func (e *specEncoder) Write(p []byte) (int, error) {
	e.buf = append(e.buf, p...)
	return len(p), nil
}

// maxPooledSpecBuffer bounds the buffers kept for reuse, so that one huge
// spec does not pin its buffer forever.
const maxPooledSpecBuffer = 64 << 10

var specEncoders = sync.Pool{New: func() any {
	e := &specEncoder{buf: make([]byte, 0, 1024)}
	e.enc = json.NewEncoder(e)
	return e
}}

// appendContainerSpecJSON appends json.Marshal(s) to b. s must not be nil.
func appendContainerSpecJSON(b []byte, s *ContainerSpec) []byte {
	e := specEncoders.Get().(*specEncoder)
	defer e.release()
	e.buf = e.spec(e.buf[:0], s, nil, nil)
	return append(b, e.buf...)
}

// hashContainerSpec returns the FNV-64a hash of json.Marshal(s). s must
// not be nil. If pod is not nil, s.Volumes is ignored and the volumes are
// those NewContainerSpec(pod, c) would set (mountedVolumes).
func hashContainerSpec(s *ContainerSpec, pod *corev1.Pod, c *corev1.Container) uint64 {
	e := specEncoders.Get().(*specEncoder)
	defer e.release()
	e.buf = e.spec(e.buf[:0], s, pod, c)
	h := fnv.New64a()
	_, _ = h.Write(e.buf)
	return h.Sum64()
}

// release empties e and returns it to the pool.
func (e *specEncoder) release() {
	e.buf = e.buf[:0]
	if cap(e.buf) <= maxPooledSpecBuffer {
		specEncoders.Put(e)
	}
}

// generic appends v's encoding by encoding/json, as json.Marshal would
// write it as a field or element: v is a pointer, so that methods on
// pointer receivers apply as they do to the addressable fields Marshal
// sees.
func (e *specEncoder) generic(b []byte, v any) []byte {
	e.buf = b
	if err := e.enc.Encode(v); err != nil {
		panic("engine: marshal " + err.Error())
	}
	// Encoder.Encode is Marshal followed by a newline.
	return e.buf[:len(e.buf)-1]
}

// raw appends s.
func (e *specEncoder) raw(b []byte, s string) []byte { return append(b, s...) }

// plainJSONString reports whether encoding/json writes s as is between
// quotes: printable ASCII without the characters it escapes (quote,
// backslash, and <, > and & as HTML escaping is on).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !htmlSafe[s[i]] {
			return false
		}
	}
	return true
}

// htmlSafe is encoding/json's htmlSafeSet, extended to all bytes: the
// ASCII bytes it copies unescaped when HTML escaping is on. Bytes from
// utf8.RuneSelf up are false.
var htmlSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// str appends s as a JSON string, escaped as encoding/json's appendString
// escapes it with HTML escaping on (this is a port of it).
func (e *specEncoder) str(b []byte, s string) []byte {
	b = append(b, '"')
	i := 0
	for i < len(s) && htmlSafe[s[i]] {
		i++
	}
	if i == len(s) {
		b = append(b, s...)
		return append(b, '"')
	}
	start := 0
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if htmlSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				// Other control bytes, and <, > and &.
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			// Invalid UTF-8.
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// strs appends a non-nil string slice.
func (e *specEncoder) strs(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.str(b, s)
	}
	return append(b, ']')
}

// object tracks the separators of a JSON object being written.
type object struct{ n int }

// key appends the separator and k, a quoted plain key and its colon.
func (o *object) key(b []byte, k string) []byte {
	if o.n > 0 {
		b = append(b, ',')
	}
	o.n++
	return append(b, k...)
}

// The methods below follow the struct order and json tags of their types:
// a key is written only where the tag has no omitempty or the value is not
// empty, as encoding/json does. Values handed to generic are pointees or
// copies, never addresses of fields of s, so that a ContainerSpec on the
// caller's stack stays there.

// spec writes s; with pod not nil, with the volumes of c in pod in place
// of s.Volumes.
func (e *specEncoder) spec(b []byte, s *ContainerSpec, pod *corev1.Pod, c *corev1.Container) []byte {
	b = append(b, '{')
	o := object{}
	b = o.key(b, `"image":`)
	b = e.str(b, s.Image)
	if len(s.Command) > 0 {
		b = o.key(b, `"command":`)
		b = e.strs(b, s.Command)
	}
	if len(s.Args) > 0 {
		b = o.key(b, `"args":`)
		b = e.strs(b, s.Args)
	}
	if s.WorkingDir != "" {
		b = o.key(b, `"workingDir":`)
		b = e.str(b, s.WorkingDir)
	}
	if len(s.Ports) > 0 {
		b = o.key(b, `"ports":`)
		b = append(b, '[')
		for i := range s.Ports {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.port(b, &s.Ports[i])
		}
		b = append(b, ']')
	}
	if len(s.EnvFrom) > 0 {
		b = o.key(b, `"envFrom":`)
		b = append(b, '[')
		for i := range s.EnvFrom {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.generic(b, &s.EnvFrom[i])
		}
		b = append(b, ']')
	}
	if len(s.Env) > 0 {
		b = o.key(b, `"env":`)
		b = append(b, '[')
		for i := range s.Env {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.env(b, &s.Env[i])
		}
		b = append(b, ']')
	}
	b = o.key(b, `"resources":`)
	b = e.resources(b, &s.Resources)
	if len(s.VolumeMounts) > 0 {
		b = o.key(b, `"volumeMounts":`)
		b = append(b, '[')
		for i := range s.VolumeMounts {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.mount(b, &s.VolumeMounts[i])
		}
		b = append(b, ']')
	}
	if len(s.VolumeDevices) > 0 {
		b = o.key(b, `"volumeDevices":`)
		b = append(b, '[')
		for i := range s.VolumeDevices {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.generic(b, &s.VolumeDevices[i])
		}
		b = append(b, ']')
	}
	if s.SecurityContext != nil {
		b = o.key(b, `"securityContext":`)
		b = e.generic(b, s.SecurityContext)
	}
	if s.Stdin {
		b = o.key(b, `"stdin":`)
		b = e.raw(b, "true")
	}
	if s.StdinOnce {
		b = o.key(b, `"stdinOnce":`)
		b = e.raw(b, "true")
	}
	if s.TTY {
		b = o.key(b, `"tty":`)
		b = e.raw(b, "true")
	}
	if s.TerminationMessagePath != "" {
		b = o.key(b, `"terminationMessagePath":`)
		b = e.str(b, s.TerminationMessagePath)
	}
	if s.TerminationMessagePolicy != "" {
		b = o.key(b, `"terminationMessagePolicy":`)
		b = e.str(b, string(s.TerminationMessagePolicy))
	}
	if pod == nil {
		if len(s.Volumes) > 0 {
			b = o.key(b, `"volumes":`)
			b = append(b, '[')
			for i := range s.Volumes {
				if i > 0 {
					b = append(b, ',')
				}
				b = e.volume(b, &s.Volumes[i])
			}
			b = append(b, ']')
		}
	} else {
		n := 0
		for v := range mountedVolumes(pod, c) {
			if n == 0 {
				b = o.key(b, `"volumes":`)
				b = append(b, '[')
			} else {
				b = append(b, ',')
			}
			n++
			b = e.volume(b, v)
		}
		if n > 0 {
			b = append(b, ']')
		}
	}
	if s.PodSecurityContext != nil {
		b = o.key(b, `"podSecurityContext":`)
		if podSecurityContextEmpty(s.PodSecurityContext) {
			b = e.raw(b, "{}")
		} else {
			b = e.generic(b, s.PodSecurityContext)
		}
	}
	return append(b, '}')
}

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
