package syncer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/errdefs"
)

// Bounds of the names the engine turns into file names and paths.
const (
	// maxNameBytes is the longest file name Linux accepts (NAME_MAX).
	maxNameBytes = 255
	// maxPathBytes is the longest path Linux accepts (PATH_MAX, with its
	// NUL).
	maxPathBytes = 4095
)

// checkName returns an error wrapping ErrInvalidSpec if v cannot be one
// file name in a directory podsync owns: empty, "." or "..", with a '/' or
// a NUL byte, or longer than NAME_MAX.
func checkName(what, v string) error {
	var why string
	switch {
	case v == "":
		why = "is empty"
	case v == "." || v == "..":
		why = "is a relative directory name"
	case strings.ContainsAny(v, "/\x00"):
		why = "contains '/' or a NUL byte"
	case len(v) > maxNameBytes:
		why = fmt.Sprintf("is longer than %d bytes", maxNameBytes)
	default:
		return nil
	}
	return fmt.Errorf("%s %q %s: %w", what, v, why, errdefs.ErrInvalidSpec)
}

// checkLocalPath returns an error wrapping ErrInvalidSpec unless v is a
// relative path that stays below the directory it is joined to: not
// empty, not absolute, no ".." element, no NUL byte, no element longer
// than NAME_MAX and at most PATH_MAX in all.
func checkLocalPath(what, v string) error {
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
	case len(v) > maxPathBytes:
		why = fmt.Sprintf("is longer than %d bytes", maxPathBytes)
	default:
		for _, e := range strings.Split(v, "/") {
			if len(e) > maxNameBytes {
				why = fmt.Sprintf("has an element longer than %d bytes", maxNameBytes)
				break
			}
		}
		if why == "" {
			return nil
		}
	}
	return fmt.Errorf("%s %q %s: %w", what, v, why, errdefs.ErrInvalidSpec)
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

// CheckPodPaths returns an error wrapping ErrInvalidSpec if a name of pod
// that the engine turns into a path could leave the directory it belongs
// in, or cannot be a file name: the UID (<root>/pods/<uid>), namespace and
// name (<pod-log-dir>/<namespace>_<name>_<uid>), container names (log and
// termination-message directories), volume names
// (<root>/pods/<uid>/volumes/<plugin>/<name>), hostPath paths (absolute,
// no ".."), static subPaths and configMap and secret item paths (relative,
// no ".."), and localhost seccomp profiles (relative to <root>/seccomp).
// The server validates requests more strictly; this is the engine's own
// defence, for every caller.
func CheckPodPaths(pod *corev1.Pod) error {
	if pod == nil {
		return fmt.Errorf("no pod: %w", errdefs.ErrInvalidSpec)
	}
	errs := []error{checkName("pod uid", string(pod.UID))}
	for _, v := range []struct{ what, value string }{{"pod namespace", pod.Namespace}, {"pod name", pod.Name}} {
		if strings.ContainsAny(v.value, "/\x00") || v.value == "" {
			errs = append(errs, fmt.Errorf("%s %q is empty or contains '/' or a NUL byte: %w", v.what, v.value, errdefs.ErrInvalidSpec))
		}
	}
	if errs[0] == nil {
		// The log directory's name joins namespace, name and UID.
		errs = append(errs, checkName("pod log directory name", strings.Join([]string{pod.Namespace, pod.Name, string(pod.UID)}, "_")))
	}
	checkContainer := func(c *corev1.Container) {
		errs = append(errs, checkName("container name", c.Name))
		for _, m := range c.VolumeMounts {
			if m.SubPath != "" {
				errs = append(errs, checkLocalPath(fmt.Sprintf("subPath of volume mount %q of container %q", m.Name, c.Name), m.SubPath))
			}
		}
		if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil {
			errs = append(errs, checkSeccomp(sc.SeccompProfile))
		}
	}
	for i := range pod.Spec.InitContainers {
		checkContainer(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		checkContainer(&pod.Spec.Containers[i])
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		errs = append(errs, checkSeccomp(sc.SeccompProfile))
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		errs = append(errs, checkName("volume name", v.Name))
		var items []corev1.KeyToPath
		switch {
		case v.HostPath != nil:
			p := v.HostPath.Path
			if !filepath.IsAbs(p) || hasDotDot(p) || strings.IndexByte(p, 0) >= 0 || len(p) > maxPathBytes {
				errs = append(errs, fmt.Errorf("hostPath %q of volume %q must be an absolute path without '..' or NUL: %w", p, v.Name, errdefs.ErrInvalidSpec))
			}
		case v.ConfigMap != nil:
			items = v.ConfigMap.Items
		case v.Secret != nil:
			items = v.Secret.Items
		}
		for _, it := range items {
			errs = append(errs, checkLocalPath(fmt.Sprintf("item path of key %q of volume %q", it.Key, v.Name), it.Path))
		}
	}
	return errors.Join(errs...)
}

func checkSeccomp(p *corev1.SeccompProfile) error {
	if p.Type != corev1.SeccompProfileTypeLocalhost || p.LocalhostProfile == nil {
		return nil
	}
	return checkLocalPath("localhost seccomp profile", *p.LocalhostProfile)
}

// ResolveSubPath returns the host path of subPath within the volume
// directory root, for a bind mount: root/subPath, after checking, one
// element at a time and without following symbolic links, that no element
// below root is a symbolic link. A container can write a symbolic link
// into a volume it mounts (an emptyDir, a hostPath); the runtime's bind
// mount would follow it out of the volume, to the node's /etc say. Missing
// elements are created as directories with root's permission bits, as the
// kubelet does.
//
// It returns an error wrapping ErrInvalidSpec for a subPath that is not
// relative and free of ".." and NUL bytes, or that crosses a symbolic link
// or a file that is not a directory. The kubelet allows symbolic links
// that stay within the volume; podsync refuses every one.
//
// NOTE(podsync): the check runs when a container is created. A container
// of the same pod that runs meanwhile and can write the volume could swap
// an element for a symbolic link between the check and the runtime's
// mount; the kubelet closes that window by bind-mounting the file
// descriptor it checked, which podsync does not do.
func ResolveSubPath(root, subPath string) (string, error) {
	if err := checkLocalPath("subPath", subPath); err != nil {
		return "", err
	}
	clean := filepath.Clean(subPath)
	if clean == "." {
		return root, nil
	}
	fi, err := os.Stat(root)
	if err != nil {
		return "", fmt.Errorf("subPath %q: volume directory: %w", subPath, err)
	}
	mode := uint32(fi.Mode().Perm())
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("subPath %q: open volume directory %s: %w", subPath, root, err)
	}
	elems := strings.Split(clean, "/")
	for i, e := range elems {
		next, err := openNoFollow(fd, e, mode)
		_ = unix.Close(fd)
		if err != nil {
			return "", fmt.Errorf("subPath %q of volume %s: %q: %w", subPath, root, filepath.Join(elems[:i+1]...), err)
		}
		fd = next
	}
	_ = unix.Close(fd)
	return filepath.Join(root, clean), nil
}

// openNoFollow opens the element name of the directory dirfd without
// following a symbolic link, creating it as a directory (mode) if it is
// missing, and checks that it is a directory or, when it is the last
// element, a directory or a regular file.
func openNoFollow(dirfd int, name string, mode uint32) (int, error) {
	for range 2 {
		fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(dirfd, name, mode); err != nil && !errors.Is(err, unix.EEXIST) {
				return -1, fmt.Errorf("create directory: %w", err)
			}
			continue // open what is there now
		}
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			_ = unix.Close(fd)
			return -1, err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR, unix.S_IFREG:
			return fd, nil
		case unix.S_IFLNK:
			_ = unix.Close(fd)
			return -1, fmt.Errorf("is a symbolic link, which podsync does not follow: %w", errdefs.ErrInvalidSpec)
		default:
			_ = unix.Close(fd)
			return -1, fmt.Errorf("is neither a directory nor a regular file: %w", errdefs.ErrInvalidSpec)
		}
	}
	return -1, fmt.Errorf("appeared and vanished while being created: %w", unix.ENOENT)
}
