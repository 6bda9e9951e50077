//go:build integration

// Package workers_test runs the engine's Node — pod workers, the store,
// probers, recovery, garbage collection — against a private containerd
// (internal/localcri): PODSYNC_CONTAINERD=2 (default) or 1.6. The tests
// run one at a time: a Node removes podsync's pods its store does not
// hold, which includes another test's.
package workers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/podsync/podsync/internal/localcri"
	"github.com/podsync/podsync/internal/localcri/localcritest"
)

// inst is the package's private containerd, started by TestMain.
var inst *localcri.Instance

func TestMain(m *testing.M) {
	localcritest.Main(m, localcritest.Config{
		Package: "test/integration/workers",
		Started: func(i *localcri.Instance) error {
			inst = i
			// Every test's crictl comes from here; install it once.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_, err := localcri.EnsureCrictl(ctx, inst.ToolsDir())
			return err
		},
		Finished: func() error {
			if err := removeCgroups(cgroupRoot()); err != nil {
				return fmt.Errorf("pod cgroups left behind: %w", err)
			}
			return nil
		},
	})
}
