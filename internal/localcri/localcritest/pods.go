package localcritest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/podsync/podsync/internal/localcri"
)

// CgroupRoot is the cgroup root under which an instance's test pods put
// their cgroups; Config.PodCgroups removes it after the tests.
func CgroupRoot(inst *localcri.Instance) string { return "/podsync-itest-" + inst.ID() }

// RemoveCgroups removes the cgroups under root in every hierarchy; they
// are empty once the runtime's pods are gone.
func RemoveCgroups(root string) error {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	var errs []error
	for _, h := range hierarchies {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d fs.DirEntry, err error) error {
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

// PodPackage is the Config of a package whose tests run pods: it installs
// crictl once (the tests' oracle) and fails the run when the pods'
// cgroups (under CgroupRoot) are left behind. started receives the
// instance.
func PodPackage(pkg string, started func(*localcri.Instance)) Config {
	var inst *localcri.Instance
	return Config{
		Package: pkg,
		Started: func(i *localcri.Instance) error {
			inst = i
			started(i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_, err := localcri.EnsureCrictl(ctx, i.ToolsDir())
			return err
		},
		Finished: func() error {
			if err := RemoveCgroups(CgroupRoot(inst)); err != nil {
				return fmt.Errorf("pod cgroups left behind: %w", err)
			}
			return nil
		},
	}
}
