package localcri

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"
)

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// Paths of Debian's packages.
const (
	busyboxPath = "/usr/bin/busybox" // busybox-static
	runcPath    = "/usr/sbin/runc"   // runc
)

// sbinDirs are searched for system tools when PATH lacks them.
var sbinDirs = []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"}

// systemTool finds a system tool such as ip or iptables-save on PATH or in
// the sbin directories; it returns "" when there is none.
func systemTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range sbinDirs {
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	return ""
}

// requirement is a file that a Debian package provides.
type requirement struct {
	path string
	pkg  string
}

func requirements(f Flavour) []requirement {
	reqs := []requirement{
		{runcPath, "runc"},
		{filepath.Join(cniBinDir, "bridge"), "containernetworking-plugins"},
		{filepath.Join(cniBinDir, "host-local"), "containernetworking-plugins"},
		{filepath.Join(cniBinDir, "portmap"), "containernetworking-plugins"},
		{filepath.Join(cniBinDir, "loopback"), "containernetworking-plugins"},
		{busyboxPath, "busybox-static"},
	}
	if f == Containerd16 {
		reqs = append(reqs,
			requirement{"/usr/bin/containerd", "containerd"},
			requirement{"/usr/bin/ctr", "containerd"},
			requirement{"/usr/bin/containerd-shim-runc-v2", "containerd"},
		)
	}
	return reqs
}

// missingPackages lists, sorted and without duplicates, the packages whose
// files are missing. iproute2 is added when no `ip` is on PATH.
func missingPackages(f Flavour) []string {
	var pkgs []string
	for _, r := range requirements(f) {
		if _, err := os.Stat(r.path); err != nil {
			pkgs = append(pkgs, r.pkg)
		}
	}
	if systemTool("ip") == "" {
		pkgs = append(pkgs, "iproute2")
	}
	slices.Sort(pkgs)
	return slices.Compact(pkgs)
}

// ensurePackages installs the missing Debian packages with apt-get when
// running as root, and otherwise returns an error naming them.
func ensurePackages(ctx context.Context, log *zap.Logger, f Flavour) error {
	pkgs := missingPackages(f)
	if len(pkgs) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing Debian packages %s: run `apt-get install -y %s` as root",
			strings.Join(pkgs, ", "), strings.Join(pkgs, " "))
	}
	log.Info("installing debian packages", zap.Strings("packages", pkgs))
	install := append([]string{"-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends"}, pkgs...)
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if _, err := runCommand(ctx, env, "", "apt-get", install...); err != nil {
		// The package lists may be missing or stale: refresh them once.
		if _, uerr := runCommand(ctx, env, "", "apt-get", "-o", "DPkg::Lock::Timeout=300", "update"); uerr != nil {
			return fmt.Errorf("apt-get update: %w", uerr)
		}
		if _, err := runCommand(ctx, env, "", "apt-get", install...); err != nil {
			return fmt.Errorf("apt-get install %s: %w", strings.Join(pkgs, " "), err)
		}
	}
	if still := missingPackages(f); len(still) > 0 {
		return fmt.Errorf("packages %s still missing after apt-get install", strings.Join(still, ", "))
	}
	return nil
}

// EnsureFile installs the Debian package pkg unless path exists (as root;
// otherwise it returns an error naming the package), for the tools that
// need more of Debian than an instance does (bash-static for the
// conformance images).
func EnsureFile(ctx context.Context, log *zap.Logger, path, pkg string) error {
	if fileExists(path) {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing %s: run `apt-get install -y %s` as root", path, pkg)
	}
	if log == nil {
		log = zap.NewNop()
	}
	log.Info("installing debian packages", zap.Strings("packages", []string{pkg}))
	install := []string{"-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends", pkg}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if _, err := runCommand(ctx, env, "", "apt-get", install...); err != nil {
		if _, uerr := runCommand(ctx, env, "", "apt-get", "-o", "DPkg::Lock::Timeout=300", "update"); uerr != nil {
			return fmt.Errorf("apt-get update: %w", uerr)
		}
		if _, err := runCommand(ctx, env, "", "apt-get", install...); err != nil {
			return fmt.Errorf("apt-get install %s: %w", pkg, err)
		}
	}
	if !fileExists(path) {
		return fmt.Errorf("%s still missing after apt-get install %s", path, pkg)
	}
	return nil
}

// ensureContainerd2 builds containerd v2.4.2, its runc shim and ctr into the
// tools directory unless they are there already. Concurrent callers on the
// machine wait for one build.
func ensureContainerd2(ctx context.Context, log *zap.Logger, toolsDir string) error {
	bin := containerd2Dir(toolsDir)
	names := []string{"containerd", "containerd-shim-runc-v2", "ctr"}
	have := func() bool {
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(bin, n)); err != nil {
				return false
			}
		}
		return true
	}
	if have() {
		return nil
	}
	lock, err := lockFile(ctx, bin+".lock")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if have() {
		return nil
	}
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("clean %s: %w", tmp, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	pkgs := make([]string, 0, len(names))
	for _, n := range names {
		pkgs = append(pkgs, "github.com/containerd/containerd/v2/cmd/"+n+"@"+Containerd2Version)
	}
	log.Info("building containerd from the go module proxy (once: 5-10 minutes on 2 cores)", zap.String("gobin", bin))
	if err := goInstall(ctx, toolsDir, tmp, pkgs...); err != nil {
		return err
	}
	if err := os.RemoveAll(bin); err != nil {
		return fmt.Errorf("clean %s: %w", bin, err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return fmt.Errorf("install containerd binaries: %w", err)
	}
	return nil
}

// EnsureCrictl installs crictl (CrictlVersion) into <toolsDir>/bin unless it
// is there, and returns its path. It takes about a minute the first time.
func EnsureCrictl(ctx context.Context, toolsDir string) (string, error) {
	bin := filepath.Join(toolsDir, "bin")
	path := filepath.Join(bin, "crictl")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	lock, err := lockFile(ctx, filepath.Join(toolsDir, "crictl.lock"))
	if err != nil {
		return "", err
	}
	defer lock.Unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := goInstall(ctx, toolsDir, bin, "sigs.k8s.io/cri-tools/cmd/crictl@"+CrictlVersion); err != nil {
		return "", err
	}
	return path, nil
}

// goInstall runs `go install pkgs...` with GOBIN=gobin.
func goInstall(ctx context.Context, dir, gobin string, pkgs ...string) error {
	gocmd, err := goCommand()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(gobin, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", gobin, err)
	}
	env := append(os.Environ(), "GOBIN="+gobin, "CGO_ENABLED=0")
	if _, err := runCommand(ctx, env, dir, gocmd, append([]string{"install"}, pkgs...)...); err != nil {
		return fmt.Errorf("go install %s: %w", strings.Join(pkgs, " "), err)
	}
	return nil
}

// goCommand finds the go command: on PATH, else where Go installs itself
// on these machines (/usr/local/go), which a root shell's PATH may lack.
func goCommand() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	const p = "/usr/local/go/bin/go"
	if _, err := os.Stat(p); err != nil {
		return "", errors.New("no go command on PATH or in /usr/local/go/bin")
	}
	return p, nil
}

// runCommand runs a command and returns its combined output; a failure
// carries the last lines of the output.
func runCommand(ctx context.Context, env []string, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s: %w: %s", name, err, tail(out.String(), 2000))
	}
	return out.Bytes(), nil
}

// tail returns at most the last n bytes of s, trimmed.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}
