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
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/validation"
)

// mountInfoPath is the mount table podsync reads; a variable for tests.
var mountInfoPath = "/proc/self/mountinfo"

// mountPoint is one line of the mount table.
type mountPoint struct {
	path   string
	fsType string
}

// readMounts parses /proc/self/mountinfo: the mount point (field 5,
// octal-escaped) and the file system type (the first field after "-").
func readMounts() ([]mountPoint, error) {
	data, err := os.ReadFile(mountInfoPath)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	var out []mountPoint
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		out = append(out, mountPoint{path: unescapeMount(fields[4]), fsType: fields[sep+1]})
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

// realPath resolves the symbolic links of p's existing prefix (the root
// directory an operator configured may be one), as the mount table names
// mount points by their real path.
func realPath(p string) (string, error) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", p, err)
	}
	return r, nil
}

// isTmpfs reports whether dir is the mount point of a tmpfs.
func isTmpfs(dir string) (bool, error) {
	real, err := realPath(dir)
	if err != nil {
		return false, err
	}
	mounts, err := readMounts()
	if err != nil {
		return false, err
	}
	// The last mount of a path is the one visible.
	for i := len(mounts) - 1; i >= 0; i-- {
		if mounts[i].path == real {
			return mounts[i].fsType == "tmpfs", nil
		}
	}
	return false, nil
}

// tmpfsVolume is a memory-backed volume of a pod: a secret volume or an
// emptyDir of medium Memory.
type tmpfsVolume struct {
	dir  string
	size int64       // bytes; 0: the kernel's default
	mode os.FileMode // of the tmpfs root
	// secret volumes are mounted whatever the pod's containers hold: their
	// files must never be written to disk.
	secret bool
}

// setupTmpfs makes v.dir a tmpfs mount, as the kubelet's emptyDir
// setupTmpfs: an existing tmpfs at v.dir is kept as it is (passes and
// restarts of podsyncd reuse it rather than stack another over it). A
// directory that is not a mount yet — a volume written to disk by an older
// podsync — is mounted over, and what it holds is removed first, only
// when newSandbox says that no container of the pod runs (none holds the
// directory): otherwise a secret is mounted over it and its old files stay
// beneath for the running containers that see them until the pod's
// sandbox is re-created or the pod removed, and a memory emptyDir stays the
// disk directory its running containers share (a tmpfs over it would split
// the volume between them). The tmpfs is mounted noswap where the kernel
// offers it (6.4 and later), so that its pages never reach a disk either.
func setupTmpfs(v tmpfsVolume, newSandbox bool) error {
	_, statErr := os.Lstat(v.dir)
	existed := statErr == nil
	if err := os.MkdirAll(v.dir, v.mode); err != nil {
		return fmt.Errorf("create volume directory: %w", err)
	}
	mounted, err := isTmpfs(v.dir)
	if err != nil {
		return err
	}
	switch {
	case mounted:
		return nil
	case existed && !newSandbox && !v.secret:
		// NOTE(podsync): a memory emptyDir an older podsync made on disk
		// becomes a tmpfs with the pod's next sandbox.
		return os.Chmod(v.dir, v.mode)
	case !existed || newSandbox:
		entries, err := os.ReadDir(v.dir)
		if err != nil {
			return fmt.Errorf("read volume directory: %w", err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(v.dir, e.Name())); err != nil {
				return fmt.Errorf("clear volume directory: %w", err)
			}
		}
	}
	opts := fmt.Sprintf("mode=%o", v.mode.Perm())
	if v.size > 0 {
		opts += fmt.Sprintf(",size=%d", v.size)
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV
	err = unix.Mount("tmpfs", v.dir, "tmpfs", flags, opts+",noswap")
	if errors.Is(err, unix.EINVAL) {
		// A kernel without noswap.
		err = unix.Mount("tmpfs", v.dir, "tmpfs", flags, opts)
	}
	if err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", v.dir, err)
	}
	return nil
}

// unmountBelow unmounts every mount at or below dir, deepest first, so
// that removing dir removes only what is on its own file system and
// leaves no mount behind. A busy mount (a container that still holds it
// in its mount namespace) is detached. A dir that does not exist has
// nothing mounted.
func unmountBelow(dir string) error {
	real, err := realPath(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	var paths []string
	for _, m := range mounts {
		if m.path == real || strings.HasPrefix(m.path, real+"/") {
			paths = append(paths, m.path)
		}
	}
	// Deepest (then latest) first; a path mounted twice is unmounted twice.
	slices.SortStableFunc(paths, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, p := range paths {
		err := unix.Unmount(p, unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// UnmountAll unmounts every mount at or below dir: the tmpfs volumes of
// every pod under a root directory that is dropped without RemovePod (a
// test's temporary root). RemovePod unmounts a pod's own.
func UnmountAll(dir string) error { return unmountBelow(dir) }

// TearDownVolumes removes the volumes of a pod that no longer runs, as
// the kubelet's volume manager tears down those of a terminated pod: its
// tmpfs mounts are unmounted and its volume directories removed, which
// frees what its emptyDir volumes held. The rest of the pod directory
// (hosts file, termination messages) stays until RemovePod. The node
// calls it for evicted pods once nothing of theirs runs.
func (s *Syncer) TearDownVolumes(pod *corev1.Pod) error {
	if err := validation.CheckFileName("pod uid", string(pod.UID)); err != nil {
		return fmt.Errorf("tear down volumes: %w", errdefs.InvalidSpec(err))
	}
	dir := filepath.Join(criconfig.PodDir(pod, s.cfg), "volumes")
	if err := unmountBelow(dir); err != nil {
		return fmt.Errorf("tear down volumes of pod %s: %w", plan.PodString(pod), err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("tear down volumes of pod %s: %w", plan.PodString(pod), err)
	}
	return nil
}
