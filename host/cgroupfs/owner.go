package cgroupfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked is the error of Lock when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// LockHierarchy returns the hierarchy under root (as Hierarchies finds
// them) in which a cgroup is locked: root itself on cgroup v2, else its
// memory hierarchy (every node agent needs one), else the first. Agents
// that lock the same cgroup name under the same root lock the same
// directory.
func LockHierarchy(root string) (string, error) {
	hs, err := Hierarchies(root)
	if err != nil {
		return "", err
	}
	if len(hs) == 0 {
		return "", fmt.Errorf("no cgroup hierarchy under %s", root)
	}
	if i := slices.Index(hs, filepath.Join(root, "memory")); i >= 0 {
		return hs[i], nil
	}
	return hs[0], nil
}

// Lock makes the cgroup directory dir (with its parents) if it is
// missing and takes an exclusive flock on it without waiting. While the
// returned file stays open no other Lock of dir succeeds: it fails with
// ErrLocked. The kernel releases the lock when the file is closed or the
// process ends, however it ends, so a crashed agent leaves no stale lock.
func Lock(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock cgroup %s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("lock cgroup %s: %w", dir, err)
	}
	return f, nil
}

// kubeletBestEffortShares are the CPU shares the kubelet's QoS container
// manager gives the besteffort cgroup (MinShares), and kubeletBestEffortWeight
// their cgroup v2 weight (runc's conversion of 2 shares). A runtime that
// makes the cgroup as a pod cgroup's parent leaves the defaults (1024,
// 100).
const (
	kubeletBestEffortShares = "2"
	kubeletBestEffortWeight = "1"
)

// KubeletMark reports whether besteffort, a QoS cgroup (a path such as
// /kubepods/besteffort) under the hierarchies mounted at root, carries the
// mark of a kubelet's QoS container manager: the minimum CPU shares it
// gives that cgroup when it starts and keeps there. It returns the control
// file that says so. A cgroup that is missing, or that the kubelet did not
// set, is not marked.
func KubeletMark(root, besteffort string) (bool, string) {
	candidates := []struct{ file, value string }{
		{filepath.Join(root, besteffort, "cpu.weight"), kubeletBestEffortWeight},                // v2
		{filepath.Join(root, "cpu", besteffort, "cpu.shares"), kubeletBestEffortShares},         // v1
		{filepath.Join(root, "cpu,cpuacct", besteffort, "cpu.shares"), kubeletBestEffortShares}, // v1, joined
	}
	for _, c := range candidates {
		b, err := os.ReadFile(c.file)
		if err == nil && strings.TrimSpace(string(b)) == c.value {
			return true, c.file
		}
	}
	return false, ""
}
