package hollow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/podsync/podsync/internal/daemon"
)

// CgroupDir is the directory under --root-dir that stands for a hollow
// node's cgroup file systems: a cgroup v2 hierarchy to podsyncd (it holds
// a cgroup.controllers file), plain directories to the kernel.
const CgroupDir = "hollow-cgroup"

// Main runs a hollow podsync node until ctx ends and returns its exit
// code: podsyncd's, with podsyncd's flags and configuration file
// (podsyncd --help), on a Runtime, a Mounter and the cgroup directory
// CgroupDir. --runtime-endpoint and --image-endpoint are not dialled.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return daemon.RunOn(ctx, args, stdout, stderr, daemon.Host{
		Runtime:  NewRuntime(),
		CgroupFS: cgroupFS,
		Mounter:  NewMounter(),
	})
}

// cgroupFS makes <root-dir>/CgroupDir.
func cgroupFS(cfg daemon.Config) (string, error) {
	dir := filepath.Join(cfg.RootDir, CgroupDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("hollow cgroup directory: %w", err)
	}
	marker := filepath.Join(dir, "cgroup.controllers")
	if _, err := os.Stat(marker); errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			return "", fmt.Errorf("hollow cgroup directory: %w", err)
		}
	} else if err != nil {
		return "", fmt.Errorf("hollow cgroup directory: %w", err)
	}
	return dir, nil
}
