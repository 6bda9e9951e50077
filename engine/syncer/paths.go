package syncer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/validation"
)

// resolveSubPath returns the host path of subPath within the volume
// directory root, for a bind mount: root/subPath, after checking, one
// element at a time and without following symbolic links, that no element
// below root is a symbolic link. A container can write a symbolic link
// into a volume it mounts (an emptyDir, a hostPath); the runtime's bind
// mount would follow it out of the volume, to the node's /etc say. Missing
// elements are created as directories with root's permission bits, as the
// kubelet does.
//
// It returns an error wrapping errdefs.ErrInvalidSpec for a subPath that is not
// relative and free of ".." and NUL bytes, or that crosses a symbolic link
// or a file that is not a directory. The kubelet allows symbolic links
// that stay within the volume; podsync refuses every one.
//
// NOTE(podsync): the check runs when a container is created. A container
// of the same pod that runs meanwhile and can write the volume could swap
// an element for a symbolic link between the check and the runtime's
// mount; the kubelet closes that window by bind-mounting the file
// descriptor it checked, which podsync does not do.
func resolveSubPath(root, subPath string) (string, error) {
	if err := errdefs.InvalidSpec(validation.CheckLocalPath("subPath", subPath)); err != nil {
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
