package localcritest

import (
	"context"
	"time"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// PodPackage is the Config of a package whose tests run pods: it installs
// crictl once (the tests' oracle). The pods' cgroups are under the
// instance's CgroupRoot, which its Teardown removes (and fails on if a
// cgroup still holds processes). started receives the instance.
func PodPackage(pkg string, started func(*localcri.Instance)) Config {
	return Config{
		Package: pkg,
		Started: func(i *localcri.Instance) error {
			started(i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_, err := localcri.EnsureCrictl(ctx, i.ToolsDir())
			return err
		},
	}
}
