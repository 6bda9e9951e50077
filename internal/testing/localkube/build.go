package localkube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries the control plane runs, as hack/kube/build.sh names them.
var Binaries = []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl"}

// Version is the Kubernetes version hack/kube/build.sh builds by default.
const Version = "v1.37.2"

// BinDir returns the directory the binaries are in: $KUBE_BIN when set,
// else repo/.tmp/kube/<Version>/bin.
func BinDir(repo string) string {
	if d := os.Getenv("KUBE_BIN"); d != "" {
		return d
	}
	return filepath.Join(repo, ".tmp", "kube", Version, "bin")
}

// Build makes sure the control plane's binaries (Binaries) are in
// BinDir(repo), running hack/kube/build.sh for those missing (it keeps
// what it built, so this costs nothing after the first time). Its output
// goes to log.
func Build(ctx context.Context, repo string, log *os.File) (string, error) {
	return BuildBinaries(ctx, repo, log, Binaries...)
}

// BuildBinaries is Build for the binaries names (hack/kube/build.sh's
// names: kubelet, e2e.test, ginkgo, agnhost, …).
func BuildBinaries(ctx context.Context, repo string, log *os.File, names ...string) (string, error) {
	dir := BinDir(repo)
	var missing []string
	for _, b := range names {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return dir, nil
	}
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "hack", "kube", "build.sh"), missing...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "KUBE_BIN="+dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s with hack/kube/build.sh: %w", strings.Join(missing, ", "), err)
	}
	return dir, nil
}
