package syncer

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/validation"
)

// openSubPath opens subPath within the volume directory rootfd, one
// element at a time relative to its parent and without following symbolic
// links, and returns an O_PATH descriptor of what it checked (the kubelet's
// safeOpenSubPath and doSafeMakeDir, since CVE-2017-1002101). A container
// can write a symbolic link into a volume it mounts (an emptyDir, a
// hostPath) and swap it in at any moment; the caller bind-mounts the
// returned descriptor rather than a path, so the runtime mounts what was
// checked. Missing elements are created as directories with rootfd's
// permission bits, as the kubelet does.
//
// It returns an error wrapping errdefs.ErrInvalidSpec for a subPath that is not
// relative and free of ".." and NUL bytes, or that crosses a symbolic link
// or a file that is not a directory. The kubelet allows symbolic links
// that stay within the volume; podsync refuses every one.
func openSubPath(rootfd int, subPath string) (int, error) {
	if err := errdefs.InvalidSpec(validation.CheckLocalPath("subPath", subPath)); err != nil {
		return -1, err
	}
	clean := filepath.Clean(subPath)
	var st unix.Stat_t
	if err := unix.Fstat(rootfd, &st); err != nil {
		return -1, fmt.Errorf("subPath %q: volume directory: %w", subPath, err)
	}
	fd, err := dupFd(rootfd)
	if err != nil {
		return -1, fmt.Errorf("subPath %q: %w", subPath, err)
	}
	if clean == "." {
		return fd, nil
	}
	elems := strings.Split(clean, "/")
	for i, e := range elems {
		next, err := openNoFollow(fd, e, st.Mode&0o7777)
		_ = unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("subPath %q: %q: %w", subPath, filepath.Join(elems[:i+1]...), err)
		}
		fd = next
	}
	return fd, nil
}

// dupFd duplicates fd, close-on-exec.
func dupFd(fd int) (int, error) {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("duplicate descriptor: %w", err)
	}
	return d, nil
}

// openNoFollow opens the element name of the directory dirfd without
// following a symbolic link, creating it as a directory (mode) if it is
// missing, and checks that it is a directory or, when it is the last
// element, a directory or a regular file.
//
// A directory it creates gets mode whatever podsyncd's umask, as the
// kubelet's doSafeMakeDir fchmods what mkdirat created: a subPath of an
// emptyDir (0777) is 0777, with the setgid bit an fsGroup gave the volume.
func openNoFollow(dirfd int, name string, mode uint32) (int, error) {
	created := false
	for range 2 {
		fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			err := unix.Mkdirat(dirfd, name, mode)
			if err != nil && !errors.Is(err, unix.EEXIST) {
				return -1, fmt.Errorf("create directory: %w", err)
			}
			created = err == nil
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
		case unix.S_IFDIR:
			if created && st.Mode&0o7777 != mode {
				// An O_PATH descriptor cannot be fchmod'ed; its
				// /proc/self/fd link names exactly what was opened.
				if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode); err != nil {
					_ = unix.Close(fd)
					return -1, fmt.Errorf("set the mode of the created directory: %w", err)
				}
			}
			return fd, nil
		case unix.S_IFREG:
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
