package validation

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Linux's bounds on the names and paths a pod's values become.
const (
	// MaxFileNameBytes is the longest file name Linux accepts (NAME_MAX).
	MaxFileNameBytes = 255
	// MaxPathBytes is the longest path Linux accepts (PATH_MAX, less its
	// NUL).
	MaxPathBytes = 4095
)

// PathError reports a value of a pod that cannot be the file name or the
// relative path the engine makes of it. Its message is What, Value quoted,
// then Reason: `pod uid ".." is a relative directory name`.
type PathError struct {
	// What names the value, such as "pod uid" or `subPath of volume mount
	// "data" of container "app"`.
	What string
	// Value is the value refused.
	Value string
	// Reason says what is wrong with it, such as "is empty" or "contains
	// '..'".
	Reason string
}

// Error returns What, Value quoted, and Reason.
func (e *PathError) Error() string {
	return fmt.Sprintf("%s %q %s", e.What, e.Value, e.Reason)
}

// CheckFileName returns a *PathError if v cannot be one file name in a
// directory podsync owns: empty, "." or "..", with a '/' or a NUL byte, or
// longer than MaxFileNameBytes. what names v in the error.
func CheckFileName(what, v string) error {
	var why string
	switch {
	case v == "":
		why = "is empty"
	case v == "." || v == "..":
		why = "is a relative directory name"
	case strings.ContainsAny(v, "/\x00"):
		why = "contains '/' or a NUL byte"
	case len(v) > MaxFileNameBytes:
		why = fmt.Sprintf("is longer than %d bytes", MaxFileNameBytes)
	default:
		return nil
	}
	return &PathError{What: what, Value: v, Reason: why}
}

// CheckLocalPath returns a *PathError unless v is a relative path that
// stays below the directory it is joined to: not empty, not absolute, no
// ".." element, no NUL byte, no element longer than MaxFileNameBytes and at
// most MaxPathBytes in all. what names v in the error.
func CheckLocalPath(what, v string) error {
	var why string
	switch {
	case v == "":
		why = "is empty"
	case strings.IndexByte(v, 0) >= 0:
		why = "contains a NUL byte"
	case filepath.IsAbs(v):
		why = "is absolute"
	case !filepath.IsLocal(v) || hasDotDot(v):
		why = "contains '..'"
	case len(v) > MaxPathBytes:
		why = fmt.Sprintf("is longer than %d bytes", MaxPathBytes)
	default:
		for _, e := range strings.Split(v, "/") {
			if len(e) > MaxFileNameBytes {
				why = fmt.Sprintf("has an element longer than %d bytes", MaxFileNameBytes)
				break
			}
		}
		if why == "" {
			return nil
		}
	}
	return &PathError{What: what, Value: v, Reason: why}
}

// relativePath accepts a relative path with no ".." element (a subPath, an
// item path); required says whether it may be empty.
func relativePath(p *field.Path, v string, required bool) field.ErrorList {
	switch {
	case v == "":
		if required {
			return field.ErrorList{field.Required(p, "")}
		}
	case path.IsAbs(v):
		return field.ErrorList{field.Invalid(p, v, "must be a relative path")}
	case hasDotDot(v):
		return field.ErrorList{field.Invalid(p, v, "must not contain '..'")}
	}
	return pathBytes(p, v)
}

// pathBytes accepts a path the kernel can take: no NUL byte, at most
// MaxPathBytes long, no element longer than MaxFileNameBytes.
func pathBytes(p *field.Path, v string) field.ErrorList {
	switch {
	case strings.IndexByte(v, 0) >= 0:
		return field.ErrorList{field.Invalid(p, v, "must not contain a NUL byte")}
	case len(v) > MaxPathBytes:
		return field.ErrorList{field.TooLong(p, nil, MaxPathBytes)}
	}
	for _, e := range strings.Split(v, "/") {
		if len(e) > MaxFileNameBytes {
			return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must not have an element longer than %d bytes", MaxFileNameBytes))}
		}
	}
	return nil
}

// hasDotDot reports whether a slash-separated path has a ".." element.
func hasDotDot(v string) bool {
	for _, e := range strings.Split(v, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}

// CheckPodPaths returns an error, a *PathError but for a nil pod, for each
// value of pod that the engine turns into a path and that could leave the
// directory it belongs in, or cannot be a file name: the UID
// (<root>/pods/<uid>), namespace and name
// (<pod-log-dir>/<namespace>_<name>_<uid>), container names (log and
// termination-message directories), volume names
// (<root>/pods/<uid>/volumes/<plugin>/<name>), hostPath paths (absolute, no
// ".."), static subPaths and configMap and secret item paths (relative, no
// ".."), and localhost seccomp profiles (relative to <root>/seccomp). It
// returns nil if there is none.
//
// ValidatePod is stricter; these are the checks the engine repeats for
// every caller, in its own defence.
func CheckPodPaths(pod *corev1.Pod) []error {
	if pod == nil {
		return []error{errors.New("no pod")}
	}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	uidErr := CheckFileName("pod uid", string(pod.UID))
	add(uidErr)
	for _, v := range []struct{ what, value string }{{"pod namespace", pod.Namespace}, {"pod name", pod.Name}} {
		if strings.ContainsAny(v.value, "/\x00") || v.value == "" {
			add(&PathError{What: v.what, Value: v.value, Reason: "is empty or contains '/' or a NUL byte"})
		}
	}
	if uidErr == nil {
		// The log directory's name joins namespace, name and UID.
		add(CheckFileName("pod log directory name", strings.Join([]string{pod.Namespace, pod.Name, string(pod.UID)}, "_")))
	}
	checkContainer := func(c *corev1.Container) {
		add(CheckFileName("container name", c.Name))
		for _, m := range c.VolumeMounts {
			if m.SubPath != "" {
				add(CheckLocalPath(fmt.Sprintf("subPath of volume mount %q of container %q", m.Name, c.Name), m.SubPath))
			}
		}
		if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil {
			add(checkSeccomp(sc.SeccompProfile))
		}
	}
	for i := range pod.Spec.InitContainers {
		checkContainer(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		checkContainer(&pod.Spec.Containers[i])
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		add(checkSeccomp(sc.SeccompProfile))
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		add(CheckFileName("volume name", v.Name))
		var items []corev1.KeyToPath
		switch {
		case v.HostPath != nil:
			p := v.HostPath.Path
			if !filepath.IsAbs(p) || hasDotDot(p) || strings.IndexByte(p, 0) >= 0 || len(p) > MaxPathBytes {
				add(&PathError{What: "hostPath", Value: p, Reason: fmt.Sprintf("of volume %q must be an absolute path without '..' or NUL", v.Name)})
			}
		case v.ConfigMap != nil:
			items = v.ConfigMap.Items
		case v.Secret != nil:
			items = v.Secret.Items
		case v.PersistentVolumeClaim != nil:
			add(CheckFileName(fmt.Sprintf("claimName of volume %q", v.Name), v.PersistentVolumeClaim.ClaimName))
		case v.DownwardAPI != nil:
			for _, f := range v.DownwardAPI.Items {
				add(CheckLocalPath(fmt.Sprintf("file path of volume %q", v.Name), f.Path))
			}
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				switch {
				case src.ConfigMap != nil:
					items = append(items, src.ConfigMap.Items...)
				case src.Secret != nil:
					items = append(items, src.Secret.Items...)
				case src.DownwardAPI != nil:
					for _, f := range src.DownwardAPI.Items {
						add(CheckLocalPath(fmt.Sprintf("file path of volume %q", v.Name), f.Path))
					}
				}
			}
		}
		for _, it := range items {
			add(CheckLocalPath(fmt.Sprintf("item path of key %q of volume %q", it.Key, v.Name), it.Path))
		}
	}
	return errs
}

func checkSeccomp(p *corev1.SeccompProfile) error {
	if p.Type != corev1.SeccompProfileTypeLocalhost || p.LocalhostProfile == nil {
		return nil
	}
	return CheckLocalPath("localhost seccomp profile", *p.LocalhostProfile)
}
