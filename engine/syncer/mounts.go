package syncer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/host/mounttable"
)

// SubPathsDir is the directory of the pod directory that holds the bind
// mounts given to the runtime for subPath and hostPath mounts:
// volume-subpaths/<volume>/<container>/<mount index>, as the kubelet's.
const SubPathsDir = "volume-subpaths"

// MountTarget is the bind mount given to the runtime for mount index of
// container's volumeMounts.
func MountTarget(pod *corev1.Pod, cfg criconfig.Options, volume, container string, index int) string {
	return filepath.Join(criconfig.PodDir(pod, cfg), SubPathsDir, volume, container, strconv.Itoa(index))
}

// resolveMount is criconfig's ResolveMount for pod: it opens the volume
// (a hostPath beneath its allowed prefix, or the volume's directory), then
// the subPath below it, checks what it opened, and bind-mounts that
// descriptor at MountTarget, which it returns. The runtime then mounts a
// path nobody but podsync can change: a container that swaps a directory
// of a shared volume for a symbolic link gets what was checked or an
// error, never the link's target.
func (s *Syncer) resolveMount(pod *corev1.Pod, m criconfig.MountSource) (criconfig.ResolvedMount, error) {
	var fd int
	ro := false
	var err error
	if h := m.Volume.HostPath; h != nil {
		fd, ro, err = openHostPath(s.hostPaths, h)
	} else {
		fd, err = unix.Open(m.VolumeDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			err = fmt.Errorf("open volume directory: %w", err)
		}
	}
	if err != nil {
		return criconfig.ResolvedMount{}, err
	}
	defer func() { _ = unix.Close(fd) }()
	if m.SubPath != "" {
		subPath := m.SubPath
		if criconfig.IsFileVolume(m.Volume) {
			// The atomic writer's user-visible names are links into
			// ..data: resolve the subPath in the directory ..data names,
			// as the kubelet's subPath of such a volume does (it does not
			// follow later updates either).
			ts := currentTsDir(fd)
			if ts == "" {
				return criconfig.ResolvedMount{}, fmt.Errorf("subPath %q: the volume's files are not written", m.SubPath)
			}
			subPath = filepath.Join(ts, subPath)
		}
		sub, err := openSubPath(fd, subPath)
		if err != nil {
			return criconfig.ResolvedMount{}, err
		}
		_ = unix.Close(fd)
		fd = sub
		if m.Volume.HostPath != nil {
			// Below a checked hostPath, but a mount inside it could
			// lead elsewhere: check again what is mounted.
			r, err := checkReach(s.hostPaths, fd)
			if err != nil {
				return criconfig.ResolvedMount{}, fmt.Errorf("subPath %q: %w", m.SubPath, err)
			}
			ro = ro || r
		}
	}
	target := MountTarget(pod, s.cfg, m.Volume.Name, m.Container, m.Index)
	if err := bindFd(fd, target, ro); err != nil {
		return criconfig.ResolvedMount{}, err
	}
	return criconfig.ResolvedMount{HostPath: target, ReadOnly: ro}, nil
}

// checkHostPathVolume is the kubelet's hostPath type checker, on the path
// openHostPath resolves (creating the *OrCreate types there). It runs when
// the volumes are set up, before any container mounts them.
func (s *Syncer) checkHostPathVolume(h *corev1.HostPathVolumeSource) error {
	fd, _, err := openHostPath(s.hostPaths, h)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// openHostPath opens a hostPath volume's path beneath the longest allowed
// prefix it lies under, never following a symbolic link or ".." out of
// that prefix nor an absolute link (openat2
// RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS; under the prefix /, an ordinary
// resolution without magic links), creates
// what DirectoryOrCreate and FileOrCreate ask for the same way, checks the
// type, and checks by device and inode that what it opened is not, does
// not contain and does not lie inside a denied path. It returns an O_PATH
// descriptor and whether the mount must be read-only: the prefix is :ro,
// or what it opened lies inside a :ro prefix however it was reached.
//
// Errors wrap errdefs.ErrInvalidSpec (refused by the policy, a link out of
// the prefix, the wrong type) or are the file system's.
func openHostPath(p admit.Policy, h *corev1.HostPathVolumeSource) (fd int, readOnly bool, err error) {
	clean := filepath.Clean(h.Path)
	pre, err := p.CheckHostPath(clean)
	if err != nil {
		return -1, false, fmt.Errorf("%w: %w", err, errdefs.ErrInvalidSpec)
	}
	root, err := unix.Open(pre.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false, fmt.Errorf("open allowed prefix %s: %w", pre.Path, err)
	}
	defer func() { _ = unix.Close(root) }()
	rel, err := filepath.Rel(pre.Path, clean)
	if err != nil {
		return -1, false, fmt.Errorf("hostPath %s below %s: %w", h.Path, pre.Path, err)
	}
	typ := corev1.HostPathUnset
	if h.Type != nil {
		typ = *h.Type
	}
	b := beneath{root: root, resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	if pre.Path == "/" {
		// Beneath / every absolute link would be refused; in the root
		// /, resolution is the ordinary one (still no magic links).
		b.resolve = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS
	}
	switch typ {
	case corev1.HostPathDirectoryOrCreate:
		fd, err = b.mkdirAll(rel, 0o755)
	case corev1.HostPathFileOrCreate:
		fd, err = b.create(rel, 0o644)
	default:
		fd, err = b.open(rel, 0)
		if errors.Is(err, unix.ENOENT) && typ == corev1.HostPathUnset {
			// No type: the runtime would create a missing path as a
			// directory (containerd does); create it here, beneath
			// the prefix, so that the runtime mounts what was checked.
			fd, err = b.mkdirAll(rel, 0o755)
		}
	}
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, false, fmt.Errorf("hostPath type check failed: %s is not a %s: %w", h.Path, typ, errdefs.ErrInvalidSpec)
		}
		return -1, false, fmt.Errorf("hostPath %s beneath %s: %w", h.Path, pre, err)
	}
	if err := checkHostPathType(fd, h.Path, typ); err != nil {
		_ = unix.Close(fd)
		return -1, false, err
	}
	ro, err := checkReach(p, fd)
	if err != nil {
		_ = unix.Close(fd)
		return -1, false, fmt.Errorf("hostPath %s: %w", h.Path, err)
	}
	return fd, pre.ReadOnly || ro, nil
}

// checkHostPathType is the kubelet's hostPath type check on an opened
// descriptor.
func checkHostPathType(fd int, path string, typ corev1.HostPathType) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	var ok bool
	switch typ {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectory, corev1.HostPathDirectoryOrCreate:
		ok = st.Mode&unix.S_IFMT == unix.S_IFDIR
	case corev1.HostPathFile, corev1.HostPathFileOrCreate:
		ok = st.Mode&unix.S_IFMT == unix.S_IFREG
	case corev1.HostPathSocket:
		ok = st.Mode&unix.S_IFMT == unix.S_IFSOCK
	case corev1.HostPathCharDev:
		ok = st.Mode&unix.S_IFMT == unix.S_IFCHR
	case corev1.HostPathBlockDev:
		ok = st.Mode&unix.S_IFMT == unix.S_IFBLK
	}
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not a %s: %w", path, typ, errdefs.ErrInvalidSpec)
	}
	return nil
}

// beneath resolves paths beneath the directory root with openat2 and
// resolve (RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS: a relative symbolic link
// may be followed if it stays beneath root, but no absolute link, no link
// or ".." leading out of it and no magic link such as /proc/self/fd/N).
type beneath struct {
	root    int
	resolve uint64
}

// open opens rel (clean, relative) beneath the root; the result is an
// O_PATH descriptor.
func (b beneath) open(rel string, flags uint64) (int, error) {
	if rel == "." {
		return dupFd(b.root)
	}
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | flags, Resolve: b.resolve}
	for range 16 {
		fd, err := unix.Openat2(b.root, rel, how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EAGAIN): // a rename raced the lookup
			continue
		case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
			return -1, fmt.Errorf("%q leads out of its allowed prefix (through \"..\", a symbolic link pointing out of it or an absolute one), which podsync does not follow: %w", rel, errdefs.ErrInvalidSpec)
		default:
			return -1, fmt.Errorf("open %q: %w", rel, err)
		}
	}
	return -1, fmt.Errorf("open %q: renames kept racing the lookup: %w", rel, unix.EAGAIN)
}

// mkdirAll opens the directory rel beneath the root, creating each
// missing element (mode) in its parent as opened beneath the root.
func (b beneath) mkdirAll(rel string, mode uint32) (int, error) {
	if rel == "." {
		return b.open(rel, unix.O_DIRECTORY)
	}
	elems := strings.Split(rel, "/")
	for i := range elems {
		cur := filepath.Join(elems[:i+1]...)
		fd, err := b.open(cur, unix.O_DIRECTORY)
		if errors.Is(err, unix.ENOENT) {
			parent, perr := b.open(filepath.Join(append([]string{"."}, elems[:i]...)...), unix.O_DIRECTORY)
			if perr != nil {
				return -1, perr
			}
			err = unix.Mkdirat(parent, elems[i], mode)
			_ = unix.Close(parent)
			if err != nil && !errors.Is(err, unix.EEXIST) {
				return -1, fmt.Errorf("create directory %q: %w", cur, err)
			}
			fd, err = b.open(cur, unix.O_DIRECTORY)
		}
		if err != nil {
			return -1, err
		}
		if i == len(elems)-1 {
			return fd, nil
		}
		_ = unix.Close(fd)
	}
	return -1, unix.ENOENT // not reached: elems is never empty
}

// create opens the file rel beneath the root, creating it (mode) if
// missing in its parent directory, which must exist; a symbolic link at
// rel is not followed to create its target.
func (b beneath) create(rel string, mode uint32) (int, error) {
	if fd, err := b.open(rel, 0); !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	parent, err := b.open(filepath.Dir(rel), unix.O_DIRECTORY)
	if err != nil {
		return -1, err
	}
	defer func() { _ = unix.Close(parent) }()
	f, err := unix.Openat(parent, filepath.Base(rel), unix.O_CREAT|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, mode)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("create file %q: %w", rel, err)
	}
	if err == nil {
		_ = unix.Close(f)
	}
	return b.open(rel, 0)
}

// fileID is a file's identity: device and inode.
type fileID struct{ dev, ino uint64 }

func fstatID(fd int) (fileID, uint32, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileID{}, 0, err
	}
	return fileID{st.Dev, st.Ino}, st.Mode, nil
}

// ancestry returns the identities of fd and of every directory above it
// up to the root, walking ".." from the descriptor itself (not a path
// string), so that it sees through symbolic links and across mounts. For
// a file that is not a directory, its directory is the one its path
// under /proc/self/fd names, checked to hold that very file.
func ancestry(fd int) ([]fileID, error) {
	id, mode, err := fstatID(fd)
	if err != nil {
		return nil, err
	}
	ids := []fileID{id}
	var cur int
	if mode&unix.S_IFMT == unix.S_IFDIR {
		if cur, err = dupFd(fd); err != nil {
			return nil, err
		}
	} else {
		p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil {
			return nil, err
		}
		if cur, err = unix.Open(filepath.Dir(p), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return nil, fmt.Errorf("open the directory of %s: %w", p, err)
		}
		f, err := unix.Openat(cur, filepath.Base(p), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		var fid fileID
		if err == nil {
			fid, _, err = fstatID(f)
			_ = unix.Close(f)
		}
		if err != nil || fid != id {
			_ = unix.Close(cur)
			return nil, fmt.Errorf("%s moved while being checked: %w", p, errdefs.ErrInvalidSpec)
		}
		pid, _, err := fstatID(cur)
		if err != nil {
			_ = unix.Close(cur)
			return nil, err
		}
		ids = append(ids, pid)
	}
	defer func() { _ = unix.Close(cur) }()
	for range 4096 {
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open parent directory: %w", err)
		}
		uid, _, err := fstatID(up)
		if err != nil {
			_ = unix.Close(up)
			return nil, err
		}
		if uid == ids[len(ids)-1] { // the root is its own parent
			_ = unix.Close(up)
			return ids, nil
		}
		ids = append(ids, uid)
		_ = unix.Close(cur)
		cur = up
	}
	return nil, fmt.Errorf("directory tree deeper than 4096: %w", errdefs.ErrInvalidSpec)
}

// checkReach checks by device and inode that what fd opened is not, does
// not contain and does not lie inside one of p's denied paths (each as it
// is found now: a denied path that does not exist is skipped), and
// reports whether it lies inside a read-only allowed prefix. The error
// wraps errdefs.ErrInvalidSpec and names the denied path and why.
func checkReach(p admit.Policy, fd int) (readOnly bool, err error) {
	ids, err := ancestry(fd)
	if err != nil {
		return false, err
	}
	// The most specific relation wins (the store, not the root
	// directory holding it).
	const is, inside, contains = 0, 1, 2
	found, why := -1, ""
	for _, d := range p.DeniedHostPaths {
		dfd, err := unix.Open(d.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("open denied path %s: %w", d.Path, err)
		}
		dids, err := ancestry(dfd)
		_ = unix.Close(dfd)
		if err != nil {
			return false, fmt.Errorf("denied path %s: %w", d.Path, err)
		}
		rel := -1
		switch i := slices.Index(ids, dids[0]); {
		case i == 0:
			rel = is
		case i > 0:
			rel = inside
		case slices.Contains(dids[1:], ids[0]):
			rel = contains
		}
		if rel >= 0 && (found < 0 || rel < found) {
			found, why = rel, d.Path+", "+d.Why
		}
	}
	if found >= 0 {
		return false, fmt.Errorf("what it resolves to %s %s, which the node always refuses: %w",
			[]string{"is", "lies inside", "contains"}[found], why, errdefs.ErrInvalidSpec)
	}
	for _, pre := range p.AllowedHostPaths {
		if !pre.ReadOnly {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(pre.Path, &st); err != nil {
			continue
		}
		if slices.Contains(ids, fileID{st.Dev, st.Ino}) {
			readOnly = true
		}
	}
	return readOnly, nil
}

// bindFd bind-mounts what fd opened at target (read-only if ro), through
// /proc/self/fd so that nothing is resolved by path again, and verifies
// the mount. A correct mount already at target (an earlier pass's, or an
// earlier podsyncd's) is kept; a wrong one is replaced.
func bindFd(fd int, target string, ro bool) error {
	id, mode, err := fstatID(fd)
	if err != nil {
		return err
	}
	isDir := mode&unix.S_IFMT == unix.S_IFDIR
	switch ok, err := mountedAs(target, id, ro); {
	case err != nil:
		return err
	case ok:
		return nil
	}
	if err := mounttable.UnmountAll(target); err != nil {
		return err
	}
	if err := makeMountPoint(target, isDir); err != nil {
		return fmt.Errorf("create mount point %s: %w", target, err)
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount at %s: %w", target, err)
	}
	if ro {
		if err := unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			return errors.Join(fmt.Errorf("remount %s read-only: %w", target, err), mounttable.UnmountAll(target))
		}
	}
	if ok, err := mountedAs(target, id, ro); err != nil || !ok {
		return errors.Join(fmt.Errorf("bind mount at %s does not show what was checked: %w", target, errdefs.ErrInvalidSpec), err, mounttable.UnmountAll(target))
	}
	return nil
}

// mountedAs reports whether target is a mount point showing the file id,
// read-only if ro.
func mountedAs(target string, id fileID, ro bool) (bool, error) {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, target, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO, &stx)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", target, err)
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, fmt.Errorf("stat %s: the kernel does not say whether it is a mount point", target)
	}
	if stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, nil
	}
	if (fileID{unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino}) != id {
		return false, nil
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); err != nil {
		return false, fmt.Errorf("statfs %s: %w", target, err)
	}
	return (sfs.Flags&unix.ST_RDONLY != 0) == ro, nil
}

// makeMountPoint makes target a directory or an empty file, replacing what is
// there if it is the other kind (nothing is mounted there).
func makeMountPoint(target string, isDir bool) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return err
	}
	if fi, err := os.Lstat(target); err == nil && fi.IsDir() != isDir {
		if err := os.Remove(target); err != nil {
			return err
		}
	}
	if isDir {
		if err := os.Mkdir(target, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil
	}
	fd, err := unix.Open(target, unix.O_CREAT|unix.O_NOFOLLOW|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}
