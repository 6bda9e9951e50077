//go:build integration

package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
	"github.com/podsync/podsync/internal/testing/localkube"
)

var (
	// insts are the two nodes' containerds.
	insts [2]*localcri.Instance
	// podsyncdBin is the podsyncd binary TestMain built.
	podsyncdBin string
	// vkBin is the podsync-vk binary TestMain built.
	vkBin string
	// kubeBin holds the Kubernetes binaries and metrics-server.
	kubeBin string
)

func TestMain(m *testing.M) {
	var binDir string
	localcritest.Main(m, localcritest.Config{
		Package: "test/integration/cluster",
		// One pod network over both nodes (localcluster's).
		DefaultRoute: true,
		Started: func(i *localcri.Instance) error {
			insts[0] = i
			repo, err := localcri.RepoDir()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
			defer cancel()
			// The first build takes about 15 minutes on 2 cores; later
			// runs find the binaries under .tmp/kube.
			if kubeBin, err = localkube.BuildBinaries(ctx, repo, os.Stderr, append(localkube.Binaries, "metrics-server")...); err != nil {
				return err
			}
			if insts[1], err = localcri.Start(ctx, localcri.Options{Logger: localcritest.Logger(), LogDir: filepath.Join(repo, ".tmp", "logs"), DefaultRoute: true}); err != nil {
				return fmt.Errorf("second containerd: %w", err)
			}
			if binDir, err = os.MkdirTemp("", "podsync-cluster-"); err != nil {
				return err
			}
			podsyncdBin = filepath.Join(binDir, "podsyncd")
			vkBin = filepath.Join(binDir, "podsync-vk")
			if err := localcritest.Build(vkBin, "./cmd/podsync-vk"); err != nil {
				return err
			}
			return localcritest.Build(podsyncdBin, "./cmd/podsyncd")
		},
		Finished: func() error {
			var errs []error
			for _, b := range []string{podsyncdBin, vkBin} {
				if b == "" {
					continue
				}
				if pids := localcritest.ProcessesOf(b); len(pids) > 0 {
					errs = append(errs, fmt.Errorf("%s processes left running: %v", filepath.Base(b), pids))
				}
			}
			if insts[1] != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				errs = append(errs, insts[1].Teardown(ctx))
				cancel()
			}
			if binDir != "" {
				errs = append(errs, os.RemoveAll(binDir))
			}
			return errors.Join(errs...)
		},
	})
}
