//go:build integration

package cli_test

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
)

var (
	// inst is the package's private containerd, started by TestMain.
	inst *localcri.Instance
	// podsyncdBin and podsyncctlBin are the binaries TestMain built.
	podsyncdBin, podsyncctlBin string
	// repo is the checkout, holding examples/.
	repo string
)

func TestMain(m *testing.M) {
	var binDir string
	localcritest.Main(m, localcritest.Config{
		Package: "test/integration/cli",
		Started: func(i *localcri.Instance) error {
			inst = i
			var err error
			if repo, err = localcri.RepoDir(); err != nil {
				return err
			}
			if binDir, err = os.MkdirTemp("", "podsyncctl-itest-"); err != nil {
				return err
			}
			podsyncdBin = filepath.Join(binDir, "podsyncd")
			podsyncctlBin = filepath.Join(binDir, "podsyncctl")
			if err := localcritest.Build(podsyncdBin, "./cmd/podsyncd"); err != nil {
				return err
			}
			if err := localcritest.Build(podsyncctlBin, "./cmd/podsyncctl"); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_, err = localcri.EnsureCrictl(ctx, i.ToolsDir())
			return err
		},
		Finished: func() error {
			var errs []error
			for _, bin := range []string{podsyncdBin, podsyncctlBin} {
				if bin == "" {
					continue
				}
				if pids := localcritest.ProcessesOf(bin); len(pids) > 0 {
					errs = append(errs, fmt.Errorf("%s processes left running: %v", filepath.Base(bin), pids))
				}
			}
			if binDir != "" {
				errs = append(errs, os.RemoveAll(binDir))
			}
			return errors.Join(errs...)
		},
	})
}
