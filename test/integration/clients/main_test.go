//go:build integration

package clients_test

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
	// podsyncdBin is the podsyncd binary TestMain built.
	podsyncdBin string
)

func TestMain(m *testing.M) {
	var binDir string
	localcritest.Main(m, localcritest.Config{
		Package: "test/integration/clients",
		Started: func(i *localcri.Instance) error {
			inst = i
			var err error
			if binDir, err = os.MkdirTemp("", "podsyncd-itest-"); err != nil {
				return err
			}
			podsyncdBin = filepath.Join(binDir, "podsyncd")
			return localcritest.Build(podsyncdBin, "./cmd/podsyncd")
		},
		Finished: func() error {
			// Every podsyncd a test started was stopped and reaped.
			var errs []error
			if podsyncdBin != "" {
				if pids := localcritest.ProcessesOf(podsyncdBin); len(pids) > 0 {
					errs = append(errs, fmt.Errorf("podsyncd processes left running: %v", pids))
				}
			}
			if binDir != "" {
				errs = append(errs, os.RemoveAll(binDir))
			}
			return errors.Join(errs...)
		},
	})
}
