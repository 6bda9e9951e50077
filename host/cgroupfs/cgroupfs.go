package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Hierarchies returns the hierarchies mounted under root: root itself on a
// cgroup v2 host, else each of its directories (cgroup v1 controllers and
// a hybrid host's "unified"), skipping the symlinks that alias joined
// controllers (cpu -> cpu,cpuacct).
func Hierarchies(root string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return []string{root}, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("list cgroup hierarchies: %w", err)
	}
	var out []string
	for _, e := range entries {
		// A DirEntry of a symlink is not a directory.
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	return out, nil
}

// RemoveTree removes dir and the cgroups below it, deepest first (a cgroup
// directory can be removed only when it has no child cgroups; its control
// files go with it), but not those keep reports (nil keeps none) nor, so,
// their parents. A cgroup that still holds processes stays and is
// reported (EBUSY, naming it); one already gone is not.
func RemoveTree(dir string, keep func(string) bool) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.Reverse(dirs)
	var errs []error
	for _, d := range dirs {
		if keep != nil && keep(d) {
			continue
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
