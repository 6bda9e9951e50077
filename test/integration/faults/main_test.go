//go:build integration

package faults_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

var (
	// inst is the package's private containerd, started by TestMain.
	inst *localcri.Instance
	// podsyncdBin is the podsyncd TestMain built with -tags failpoints.
	podsyncdBin string
)

func TestMain(m *testing.M) {
	var binDir string
	cfg := localcritest.PodPackage("test/integration/faults", func(i *localcri.Instance) { inst = i })
	started := cfg.Started
	cfg.Started = func(i *localcri.Instance) error {
		if err := started(i); err != nil {
			return err
		}
		var err error
		if binDir, err = os.MkdirTemp("", "podsyncd-faults-"); err != nil {
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
		// Every pod was deleted: a process left in the pods' cgroups is
		// in a container containerd lost (a StartContainer cut short by
		// podsyncd's death can leave its runc container behind; see
		// restartForLeakedTasks). The teardown force-deletes those (and
		// says so) before it removes the cgroups; say it here first.
		if inst != nil {
			if procs := processesUnder(inst.CgroupRoot()); len(procs) > 0 {
				localcritest.Logger().Warn("containerd left processes in the pods' cgroups; the teardown kills them",
					zap.Strings("processes", procs))
			}
		}
		return errors.Join(errs...)
	}
	localcritest.Main(m, cfg)
}

// processesUnder describes the processes in the cgroup root (cgroup v1
// hierarchies).
func processesUnder(root string) []string {
	var out []string
	seen := map[int]bool{}
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", root))
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil || seen[pid] {
					continue
				}
				seen[pid] = true
				out = append(out, fmt.Sprintf("%d %s (%s)", pid, localcri.Cmdline(pid), filepath.Dir(p)))
			}
			return nil
		})
	}
	return out
}
