package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/host/cgroupfs"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(runner{m})
}

// runner removes the tests' cgroup root after them.
type runner struct{ m *testing.M }

func (r runner) Run() int {
	code := r.m.Run()
	hs, _ := cgroupfs.Hierarchies(criconfig.DefaultCgroupFS)
	for _, h := range hs {
		if err := cgroupfs.RemoveTree(filepath.Join(h, unitCgroupRoot), nil); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: remove the tests' cgroup root: %v\n", err)
			code = 1
		}
	}
	return code
}
