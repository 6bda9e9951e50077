//go:build integration

// Package daemon_test runs podsyncd as operators do — the binary, built
// once, started as a child process with flags and a config file — against
// a private containerd (internal/localcri): PODSYNC_CONTAINERD=2 (default)
// or 1.6. It talks to it with grpcurl (PODSYNC_GRPCURL, set by the
// Makefile, or .tmp/bin/grpcurl) and with grpc-go clients, and checks the
// runtime with CRI.
//
// The tests run one at a time: podsyncd removes podsync's pods its store
// does not hold, which includes another test's.
package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/podsync/podsync/internal/localcri"
	"github.com/podsync/podsync/internal/localcri/localcritest"
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
		Package: "test/integration/daemon",
		Started: func(i *localcri.Instance) error {
			inst = i
			var err error
			if binDir, err = os.MkdirTemp("", "podsyncd-itest-"); err != nil {
				return err
			}
			podsyncdBin = filepath.Join(binDir, "podsyncd")
			return buildPodsyncd(podsyncdBin)
		},
		Finished: func() error {
			// Every podsyncd a test started was stopped and reaped.
			var errs []error
			if podsyncdBin != "" {
				if pids := processesOf(podsyncdBin); len(pids) > 0 {
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

// buildPodsyncd builds cmd/podsyncd into bin, with the race detector when
// the tests have it: a data race in podsyncd then fails its exit code.
func buildPodsyncd(bin string) error {
	repo, err := localcri.RepoDir()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", bin}
	if raceEnabled() {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCommand(), append(args, "./cmd/podsyncd")...)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/podsyncd: %w\n%s", err, out)
	}
	return nil
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// goCommand is the go tool on PATH, else the usual install location.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// processesOf returns the pids of the processes running the executable
// bin.
func processesOf(bin string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && exe == bin {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
