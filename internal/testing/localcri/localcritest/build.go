package localcritest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// Build builds the repository's package pkg (such as "./cmd/podsyncd")
// into bin with the build tags given, and with the race detector when the
// calling test binary has it: a data race in the built program then fails
// its exit code.
func Build(bin, pkg string, tags ...string) error {
	return build(bin, pkg, RaceEnabled(), tags)
}

// BuildWithoutRace is Build without the race detector whatever the test
// binary has: for the tests that measure the program's memory, which the
// race detector's shadow memory multiplies.
func BuildWithoutRace(bin, pkg string, tags ...string) error {
	return build(bin, pkg, false, tags)
}

func build(bin, pkg string, race bool, tags []string) error {
	repo, err := localcri.RepoDir()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	if race {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCommand(), append(args, pkg)...)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s %s: %w\n%s", strings.Join(args, " "), pkg, err, out)
	}
	return nil
}

// RaceEnabled reports whether this test binary was built with -race.
func RaceEnabled() bool {
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

// ProcessesOf returns the pids of the processes running the executable
// bin.
func ProcessesOf(bin string) []string {
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
