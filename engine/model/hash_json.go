package model

import (
	"encoding/json"
	"hash/fnv"
	"sync"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
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
//     claims, security contexts, the lifecycle, a quantity that would need escaping) is
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
		b = list(e, b, s.Ports, (*specEncoder).port)
	}
	if len(s.EnvFrom) > 0 {
		b = o.key(b, `"envFrom":`)
		b = list(e, b, s.EnvFrom, genericElem[corev1.EnvFromSource])
	}
	if len(s.Env) > 0 {
		b = o.key(b, `"env":`)
		b = list(e, b, s.Env, (*specEncoder).env)
	}
	b = o.key(b, `"resources":`)
	b = e.resources(b, &s.Resources)
	if len(s.VolumeMounts) > 0 {
		b = o.key(b, `"volumeMounts":`)
		b = list(e, b, s.VolumeMounts, (*specEncoder).mount)
	}
	if len(s.VolumeDevices) > 0 {
		b = o.key(b, `"volumeDevices":`)
		b = list(e, b, s.VolumeDevices, genericElem[corev1.VolumeDevice])
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
	if s.Lifecycle != nil {
		b = o.key(b, `"lifecycle":`)
		b = e.generic(b, s.Lifecycle)
	}
	b = e.podFields(b, &o, s, pod, c)
	return append(b, '}')
}

// podFields writes the fields of s that come from the pod: the volumes
// the container mounts (from pod when it is not nil) and the pod's
// security context.
func (e *specEncoder) podFields(b []byte, o *object, s *ContainerSpec, pod *corev1.Pod, c *corev1.Container) []byte {
	if pod == nil {
		if len(s.Volumes) > 0 {
			b = o.key(b, `"volumes":`)
			b = list(e, b, s.Volumes, (*specEncoder).volume)
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
	if s.ShareProcessNamespace {
		b = o.key(b, `"shareProcessNamespace":`)
		b = e.raw(b, "true")
	}
	if s.UserNamespace {
		b = o.key(b, `"userNamespace":`)
		b = e.raw(b, "true")
	}
	return b
}
