package syncer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The mount table, read and undone in one place: tmpfs volumes
// (tmpfs.go) and the bind mounts of subPaths and hostPaths (mounts.go)
// live under the pod directory, and RemovePod unmounts them all.

// mountInfoPath is the mount table podsync reads; a variable for tests.
var mountInfoPath = "/proc/self/mountinfo"

// mountEntry is one line of the mount table.
type mountEntry struct {
	path   string
	fsType string
}

// readMounts parses /proc/self/mountinfo: the mount point (field 5,
// octal-escaped) and the file system type (the first field after "-").
func readMounts() ([]mountEntry, error) {
	data, err := os.ReadFile(mountInfoPath)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	var out []mountEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		out = append(out, mountEntry{path: unescapeMount(fields[4]), fsType: fields[sep+1]})
	}
	return out, sc.Err()
}

// unescapeMount undoes the kernel's octal escapes (\040 for a space) of
// a mount table path.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// realPath resolves the symbolic links of p (the root directory an
// operator configured may be one), as the mount table names mount points
// by their real path.
func realPath(p string) (string, error) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", p, err)
	}
	return r, nil
}

// mountsBelow returns the mount points at or below dir (a real path).
func mountsBelow(dir string) ([]string, error) {
	mounts, err := readMounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if m.path == dir || strings.HasPrefix(m.path, dir+"/") {
			out = append(out, m.path)
		}
	}
	return out, nil
}

// UnmountBelow unmounts every mount at or below dir, the deepest first and
// stacked ones included, and fails if any is left: the caller is about to
// remove dir, and removing through a bind mount would remove the host's
// files, or empty a tmpfs and leave it mounted. A busy mount (a container
// still holding it in its mount namespace) is detached. The kubelet's
// CleanSubPaths does the same before it removes a pod's directory;
// RemovePod calls it, and tests call it on their root directory before it
// is removed. A dir that does not exist has nothing mounted.
func UnmountBelow(dir string) error {
	real, err := realPath(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for range 8 {
		mps, err := mountsBelow(real)
		if err != nil || len(mps) == 0 {
			return err
		}
		slices.SortStableFunc(mps, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		for _, mp := range mps {
			if err := unmountAll(mp); err != nil {
				return err
			}
		}
	}
	mps, err := mountsBelow(real)
	if err == nil && len(mps) > 0 {
		err = fmt.Errorf("%s: still mounted below it: %v", dir, mps)
	}
	return err
}

// unmountAll unmounts every mount at target, stacked ones included; a
// busy one is detached.
func unmountAll(target string) error {
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
