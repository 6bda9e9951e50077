package localcritest

import (
	"context"
	"fmt"
	"time"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// CgroupRoot is the cgroup root under which an instance's test pods put
// their cgroups; Config.PodCgroups removes it after the tests.
func CgroupRoot(inst *localcri.Instance) string { return "/podsync-itest-" + inst.ID() }

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
			if err := localcri.RemoveCgroupRoot(CgroupRoot(inst)); err != nil {
				return fmt.Errorf("pod cgroups left behind: %w", err)
			}
			return nil
		},
	}
}
