package syncer

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// The kubelet's volume ownership masks (pkg/volume/volume_linux.go).
const (
	ownerRWMask   = 0o660
	ownerROMask   = 0o440
	ownerExecMask = 0o110
)

// volumeOwnership is what the kubelet's VolumeOwnership applies to one
// volume directory: the pod's fsGroup, its fsGroupChangePolicy (nil for
// the plugins that always change, as emptyDir, configMap, secret,
// downwardAPI and projected pass it), and whether the volume is read-only
// to its containers (the plugin's Attributes.ReadOnly: the group gets
// read, or read and write).
type volumeOwnership struct {
	fsGroup  int64
	policy   *corev1.PodFSGroupChangePolicy
	readOnly bool
}

// ownershipOf returns the ownership the pod's security context asks its
// volumes for, or nil without an fsGroup.
func ownershipOf(pod *corev1.Pod, readOnly bool, withPolicy bool) *volumeOwnership {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil {
		return nil
	}
	o := &volumeOwnership{fsGroup: *sc.FSGroup, readOnly: readOnly}
	if withPolicy {
		o.policy = sc.FSGroupChangePolicy
	}
	return o
}

// apply is the kubelet's ChangePermissions (volume_linux.go): unless the
// policy is OnRootMismatch and the root already has the group and the
// mode bits, every file and directory below dir (dir last) is given the
// group fsGroup and the group's read (and, unless read-only, write)
// bits; directories the group's execute bit and setgid, so that what the
// containers create there inherits the group. Symbolic links are
// re-grouped but never followed nor chmod-ed.
//
// NOTE(podsync): the walk holds each directory open and reaches every
// entry relative to it without following a link (openat with O_NOFOLLOW,
// fchownat with AT_SYMLINK_NOFOLLOW, chmod through the O_PATH descriptor),
// so a container that swaps a directory of a shared volume for a link
// while the walk runs cannot turn it on the node's files; the kubelet
// walks by path. A file whose group or mode cannot be changed is reported
// after the rest are done, where the kubelet logs and goes on.
func (o *volumeOwnership) apply(dir string) error {
	if o == nil {
		return nil
	}
	if o.policy != nil && *o.policy == corev1.FSGroupChangeOnRootMismatch && !o.rootMismatch(dir) {
		return nil
	}
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("set volume ownership of %s: %w", dir, err)
	}
	defer func() { _ = unix.Close(root) }()
	var errs []error
	o.walk(root, dir, &errs)
	o.change(root, &errs, dir)
	if len(errs) > 0 {
		return fmt.Errorf("set volume ownership (fsGroup %d) of %s: %w", o.fsGroup, dir, errors.Join(errs...))
	}
	return nil
}

// rootMismatch is the kubelet's requiresPermissionChange: dir does not
// have the group, is not a directory, or lacks a bit of the mask or
// setgid.
func (o *volumeOwnership) rootMismatch(dir string) bool {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return true
	}
	if int64(st.Gid) != o.fsGroup || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return true
	}
	want := uint32(o.mask() | ownerExecMask)
	return st.Mode&want != want || st.Mode&unix.S_ISGID == 0
}

func (o *volumeOwnership) mask() os.FileMode {
	if o.readOnly {
		return ownerROMask
	}
	return ownerRWMask
}

// walk changes every entry of the directory open as fd, depth first (a
// directory after what it holds, as the kubelet's walkDeep). path names
// fd in errors.
func (o *volumeOwnership) walk(fd int, path string, errs *[]error) {
	names, err := readNames(fd)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("read %s: %w", path, err))
		return
	}
	for _, name := range names {
		child := path + "/" + name
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				*errs = append(*errs, fmt.Errorf("stat %s: %w", child, err))
			}
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			// The link itself is re-grouped, its target never.
			if err := unix.Fchownat(fd, name, -1, int(o.fsGroup), unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.ENOENT) {
				*errs = append(*errs, fmt.Errorf("chown %s: %w", child, err))
			}
			continue
		}
		flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		}
		cfd, err := unix.Openat(fd, name, flags, 0)
		if err != nil {
			// Gone, or swapped for a link since the stat: left alone.
			if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) {
				*errs = append(*errs, fmt.Errorf("open %s: %w", child, err))
			}
			continue
		}
		if flags&unix.O_DIRECTORY != 0 {
			o.walk(cfd, child, errs)
		}
		o.change(cfd, errs, child)
		_ = unix.Close(cfd)
	}
}

// change is the kubelet's changeFilePermission for the file open as fd
// (O_PATH, or a directory): the group, then the mode with the mask (and
// for a directory execute and setgid) added. A link (an O_PATH
// descriptor of one) keeps its mode.
func (o *volumeOwnership) change(fd int, errs *[]error, path string) {
	if err := unix.Fchownat(fd, "", -1, int(o.fsGroup), unix.AT_EMPTY_PATH); err != nil {
		*errs = append(*errs, fmt.Errorf("chown %s: %w", path, err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		*errs = append(*errs, fmt.Errorf("stat %s: %w", path, err))
		return
	}
	mode := st.Mode & 0o7777
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return
	case unix.S_IFDIR:
		mode |= uint32(o.mask()) | ownerExecMask | unix.S_ISGID
	default:
		mode |= uint32(o.mask())
	}
	if mode == st.Mode&0o7777 {
		return
	}
	// chmod through the descriptor: fchmod refuses an O_PATH one, and
	// /proc/self/fd/N names the inode it holds, never a path.
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode); err != nil {
		*errs = append(*errs, fmt.Errorf("chmod %s: %w", path, err))
	}
}

// readNames returns the names in the directory open as fd, unsorted (as
// the kubelet's readDirNames), without moving fd's own offset for the
// caller: it reads a duplicate.
func readNames(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), ".")
	defer func() { _ = f.Close() }()
	return f.Readdirnames(-1)
}
