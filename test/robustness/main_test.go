//go:build robustness

package robustness_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

var (
	// inst is the package's private containerd, started by TestMain.
	inst *localcri.Instance
	// podsyncdBin is podsyncd built with -tags failpoints.
	podsyncdBin string
)

func TestMain(m *testing.M) {
	var binDir string
	cfg := localcritest.PodPackage("test/robustness", func(i *localcri.Instance) { inst = i })
	started, finished := cfg.Started, cfg.Finished
	cfg.Started = func(i *localcri.Instance) error {
		if err := started(i); err != nil {
			return err
		}
		var err error
		if binDir, err = os.MkdirTemp("", "podsyncd-robustness-"); err != nil {
			return err
		}
		podsyncdBin = filepath.Join(binDir, "podsyncd")
		return localcritest.Build(podsyncdBin, "./cmd/podsyncd", "failpoints")
	}
	cfg.Finished = func() error {
		var errs []error
		if podsyncdBin != "" {
			if pids := localcritest.ProcessesOf(podsyncdBin); len(pids) > 0 {
				errs = append(errs, fmt.Errorf("podsyncd processes left running: %v", pids))
			}
		}
		if binDir != "" {
			errs = append(errs, os.RemoveAll(binDir))
		}
		return errors.Join(append(errs, finished())...)
	}
	localcritest.Main(m, cfg)
}
