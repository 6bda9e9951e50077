package syncer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/host/mounttable"
	"github.com/podsync/podsync/validation"
)

// Mounter makes the tmpfs mounts of the pods' memory-backed volumes and
// undoes the mounts below a pod's directory before it is removed. The
// syncer's default is the kernel's: mount(2) and the mount table. A
// hollow node (internal/testing/hollow, for scale benchmarks) keeps plain
// directories instead, so that it needs neither root nor the host's mount
// table; subPath and hostPath bind mounts (mounts.go) are the kernel's
// whatever the Mounter.
type Mounter interface {
	// IsTmpfs reports whether dir is a tmpfs mount point.
	IsTmpfs(dir string) (bool, error)
	// MountTmpfs mounts a tmpfs on the directory dir, nosuid and nodev,
	// with options such as "mode=755,size=65536"; it is not swapped out
	// where the kernel offers that.
	MountTmpfs(dir, options string) error
	// UnmountBelow undoes every mount at or below dir, deepest first.
	UnmountBelow(dir string) error
}

// kernelMounter is the Mounter of the host's kernel.
type kernelMounter struct{}

var _ Mounter = kernelMounter{}

// IsTmpfs reads the mount table.
func (kernelMounter) IsTmpfs(dir string) (bool, error) { return mounttable.IsTmpfs(dir) }

// MountTmpfs mounts with noswap where the kernel offers it (6.4 and
// later), so that the tmpfs's pages never reach a disk either.
func (kernelMounter) MountTmpfs(dir, options string) error {
	const flags = unix.MS_NOSUID | unix.MS_NODEV
	err := unix.Mount("tmpfs", dir, "tmpfs", flags, options+",noswap")
	if errors.Is(err, unix.EINVAL) {
		// A kernel without noswap.
		err = unix.Mount("tmpfs", dir, "tmpfs", flags, options)
	}
	if err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// UnmountBelow unmounts what the mount table shows below dir.
func (kernelMounter) UnmountBelow(dir string) error { return mounttable.UnmountBelow(dir) }

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
// It reports whether it mounted a new, empty tmpfs.
func (s *Syncer) setupTmpfs(v tmpfsVolume, newSandbox bool) (mountedNew bool, err error) {
	_, statErr := os.Lstat(v.dir)
	existed := statErr == nil
	if err := os.MkdirAll(v.dir, v.mode); err != nil {
		return false, fmt.Errorf("create volume directory: %w", err)
	}
	mounted, err := s.mounts.IsTmpfs(v.dir)
	if err != nil {
		return false, err
	}
	switch {
	case mounted:
		return false, nil
	case existed && !newSandbox && !v.secret:
		// NOTE(podsync): a memory emptyDir an older podsync made on disk
		// becomes a tmpfs with the pod's next sandbox.
		return false, os.Chmod(v.dir, v.mode)
	case !existed || newSandbox:
		entries, err := os.ReadDir(v.dir)
		if err != nil {
			return false, fmt.Errorf("read volume directory: %w", err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(v.dir, e.Name())); err != nil {
				return false, fmt.Errorf("clear volume directory: %w", err)
			}
		}
	}
	mode := uint32(v.mode.Perm())
	if v.mode&os.ModeSticky != 0 {
		mode |= unix.S_ISVTX
	}
	opts := fmt.Sprintf("mode=%o", mode)
	if v.size > 0 {
		opts += fmt.Sprintf(",size=%d", v.size)
	}
	if err := s.mounts.MountTmpfs(v.dir, opts); err != nil {
		return false, err
	}
	return true, nil
}

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
	if err := s.mounts.UnmountBelow(dir); err != nil {
		return fmt.Errorf("tear down volumes of pod %s: %w", model.PodString(pod), err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("tear down volumes of pod %s: %w", model.PodString(pod), err)
	}
	return nil
}
