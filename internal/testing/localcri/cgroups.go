package localcri

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/podsync/podsync/host/cgroupfs"
)

// cgroupMount is where the host's cgroup file systems are mounted.
const cgroupMount = "/sys/fs/cgroup"

// CgroupHierarchies returns the cgroup mounts under /sys/fs/cgroup
// (cgroupfs.Hierarchies).
func CgroupHierarchies() ([]string, error) {
	return cgroupfs.Hierarchies(cgroupMount)
}

// MakeCgroupRoot creates the cgroup name (a path such as /podsync-bench-x)
// in every hierarchy, as an agent's --cgroup-root must exist. A new cpuset
// cgroup of cgroup v1 has no CPUs and memory nodes: it takes its
// hierarchy root's.
func MakeCgroupRoot(name string) error {
	hs, err := CgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		d := filepath.Join(h, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", d, err)
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("set %s/%s: %w", d, f, err)
				}
			}
		}
	}
	return nil
}

// RemoveCgroupRoot removes the cgroup name and every cgroup below it in
// every hierarchy (cgroupfs.RemoveTree).
func RemoveCgroupRoot(name string) error {
	hs, err := CgroupHierarchies()
	errs := []error{err}
	for _, h := range hs {
		errs = append(errs, cgroupfs.RemoveTree(filepath.Join(h, name), nil))
	}
	return errors.Join(errs...)
}
