package mounttable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// realPath makes dir absolute and resolves its symbolic links (a root
// directory an operator configured may be one): the mount table names
// mount points by their real path.
func realPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", dir, err)
	}
	r, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", dir, err)
	}
	return r, nil
}

// below lists the mount points at or below real (a resolved path), in the
// order of the mount table, a stacked mount point once a mount.
func below(real string) ([]string, error) {
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(real))
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	out := make([]string, len(infos))
	for i, m := range infos {
		out[i] = m.Mountpoint
	}
	return out, nil
}

// Below lists the mount points at or below dir, in the order of the mount
// table, a mount point as many times as mounts are stacked on it. A dir
// that does not exist has none.
func Below(dir string) ([]string, error) {
	real, err := realPath(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return below(real)
}

// IsTmpfs reports whether dir is the mount point of a tmpfs: of the mounts
// stacked on it, the last, the one visible.
func IsTmpfs(dir string) (bool, error) {
	real, err := realPath(dir)
	if err != nil {
		return false, err
	}
	infos, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) { return m.Mountpoint != real, false })
	if err != nil {
		return false, fmt.Errorf("read mount table: %w", err)
	}
	return len(infos) > 0 && infos[len(infos)-1].FSType == "tmpfs", nil
}

// UnmountBelow unmounts every mount at or below dir, the deepest first and
// stacked ones included, and fails if any is left: the caller is about to
// remove dir, and removing through a bind mount would remove the host's
// files, or empty a tmpfs and leave it mounted. A busy mount (a container
// still holding it in its mount namespace) is detached. The kubelet's
// CleanSubPaths does the same before it removes a pod's directory. A dir
// that does not exist has nothing mounted.
func UnmountBelow(dir string) error {
	real, err := realPath(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for range 8 {
		mps, err := below(real)
		if err != nil || len(mps) == 0 {
			return err
		}
		mps = slices.Compact(slices.Sorted(slices.Values(mps)))
		slices.SortStableFunc(mps, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		for _, mp := range mps {
			if err := UnmountAll(mp); err != nil {
				return err
			}
		}
	}
	mps, err := below(real)
	if err == nil && len(mps) > 0 {
		err = fmt.Errorf("%s: still mounted below it: %v", dir, mps)
	}
	return err
}

// UnmountAll unmounts every mount at target (not below it), stacked ones
// included; a busy one is detached. A target that is no mount point is
// left alone.
func UnmountAll(target string) error {
	for range 64 {
		err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil // not a mount point (any more)
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 64 unmounts", target)
}
