package syncer

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
)

// removePodCgroup removes the pod's cgroup (PodCgroupParent) from every
// hierarchy under opts.CgroupFS, as the kubelet's pod container manager
// does once a pod's sandboxes are gone: runc removes the cgroups of the
// containers it ran, not their parent, so without this every deleted pod
// leaves an empty kubepods/<qos>/pod<uid> directory per hierarchy.
//
// Only the cgroupfs driver is handled: with the systemd driver the pod's
// slice is a systemd unit, which systemd itself removes once it is empty.
// A cgroup that still has processes cannot be removed (EBUSY); the error
// says which.
func removePodCgroup(pod *corev1.Pod, opts criconfig.Options) error {
	opts = opts.WithDefaults()
	if opts.CgroupDriver != criconfig.CgroupfsDriver {
		return nil
	}
	parent := criconfig.PodCgroupParent(pod, opts)
	var errs []error
	for _, h := range cgroupHierarchies(opts.CgroupFS) {
		dir := filepath.Join(h, parent)
		// Children first: a cgroup directory can be removed only when it
		// has no child cgroups (its control files go with it).
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// cgroupHierarchies returns the hierarchies mounted under root: root
// itself on a cgroup v2 host, else each of its directories (cgroup v1
// controllers and a hybrid host's "unified"), skipping the symlinks that
// alias joined controllers (cpu -> cpu,cpuacct).
func cgroupHierarchies(root string) []string {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return []string{root}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	return out
}
