package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/podsync/podsync/internal/testing/conformance"
	"github.com/podsync/podsync/internal/testing/localcluster"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localkube"
)

func main() { os.Exit(run()) }

func say(format string, args ...any) { _, _ = fmt.Fprintf(os.Stdout, "==> "+format+"\n", args...) }

func run() int {
	subset := flag.String("subset", "full", "which tests: full (the focused suite) or ci (the bounded subset CI runs)")
	focus := flag.String("focus", "", "a regular expression of test names to run instead of the subset's")
	procs := flag.Int("procs", 2, "ginkgo processes")
	nodes := flag.Int("nodes", 2, "podsync nodes")
	keep := flag.Bool("keep", false, "leave the cluster up after the run, until ^C")
	timeout := flag.Duration("timeout", 3*time.Hour, "the whole suite's timeout")
	reportOnly := flag.Bool("report-only", false, "only write results.txt and areas.md again from the last run's JUnit report in .tmp/conformance")
	flag.Parse()
	if *reportOnly {
		repo, err := localcri.RepoDir()
		if err == nil {
			var sum conformance.Summary
			if sum, err = writeReports(filepath.Join(repo, ".tmp", "conformance")); err == nil {
				say("%s (per test: .tmp/conformance/results.txt; per area: .tmp/conformance/areas.md)", sum)
				return 0
			}
		}
		_, _ = fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
		return 1
	}
	f, skip, ok := conformance.Selection(*subset)
	if !ok {
		_, _ = fmt.Fprintf(os.Stderr, "conformance: --subset %q: want full or ci\n", *subset)
		return 2
	}
	if *focus != "" {
		f = *focus
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cluster *localcluster.Cluster
	var sum conformance.Summary
	err := func() error {
		if os.Geteuid() != 0 {
			return errors.New("make test-conformance needs root (it starts containerd and pods): run it as root")
		}
		repo, err := localcri.RepoDir()
		if err != nil {
			return err
		}
		dir := filepath.Join(repo, ".tmp", "conformance")
		_ = os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		say("building the Kubernetes binaries, e2e.test, ginkgo and the e2e images' programs into .tmp/kube (the first time: 30-40 minutes)")
		kubeBin, err := localkube.BuildBinaries(ctx, repo, os.Stderr, append(localkube.Binaries, "e2e.test", "ginkgo", "agnhost", "nnp")...)
		if err != nil {
			return err
		}
		module, err := kubeModule(ctx)
		if err != nil {
			return err
		}
		pause, err := buildStatic(ctx, repo, dir, "./internal/testing/localcri/pause")
		if err != nil {
			return err
		}
		sh, err := buildStatic(ctx, repo, dir, "./internal/testing/conformance/sh")
		if err != nil {
			return err
		}
		log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.WarnLevel))
		say("building the e2e images")
		imgs, err := conformance.BuildImages(ctx, log, filepath.Join(repo, ".tmp", "conformance-images"), conformance.Inputs{
			Agnhost: filepath.Join(kubeBin, "agnhost"), Nnp: filepath.Join(kubeBin, "nnp"), Module: module, Pause: pause, Sh: sh})
		if err != nil {
			return err
		}
		cluster, err = localcluster.Start(ctx, localcluster.Options{Dir: filepath.Join(dir, "cluster"), RepoDir: repo,
			BinDir: filepath.Join(repo, ".tmp", "bin"), KubeBin: kubeBin, Nodes: *nodes, Logger: log, Say: say,
			APIServerArgs: conformance.APIServerArgs, PodsyncdArgs: conformance.PodsyncdArgs,
			Images: []localcluster.Images{{Tar: imgs.Tar, Refs: imgs.Refs, Serve: imgs.Specs}}})
		if err != nil {
			return err
		}
		say("running the suite: focus %q, skip %q, %d processes (results: .tmp/conformance)", f, skip, *procs)
		// ginkgo writes its reports under --output-dir, the report's
		// name joined to it (an absolute name too).
		args := []string{"--procs=" + strconv.Itoa(*procs), "--timeout=" + timeout.String(), "--no-color",
			"--focus=" + f, "--skip=" + skip, "--junit-report=junit.xml", "--output-dir=" + dir,
			filepath.Join(kubeBin, "e2e.test"), "--"}
		args = append(args, conformance.E2EArgs(cluster.Kube.Kubeconfig, dir)...)
		cmd := exec.CommandContext(ctx, filepath.Join(kubeBin, "ginkgo"), args...)
		logf, err := os.Create(filepath.Join(dir, "e2e.log"))
		if err != nil {
			return err
		}
		defer func() { _ = logf.Close() }()
		cmd.Stdout, cmd.Stderr = logf, logf
		runErr := cmd.Run()
		if sum, err = writeReports(dir); err != nil {
			return errors.Join(fmt.Errorf("ginkgo: %w (its log: %s)", runErr, logf.Name()), err)
		}
		say("%s (per test: .tmp/conformance/results.txt; per area: .tmp/conformance/areas.md; the suite's log: .tmp/conformance/e2e.log)", sum)
		if *keep {
			say("the cluster stays up: export KUBECONFIG=%s; ^C to stop it", cluster.Kube.Kubeconfig)
			<-ctx.Done()
		}
		return nil
	}()
	errs := []error{err}
	if cluster != nil {
		say("stopping the cluster")
		errs = append(errs, cluster.Stop(context.Background()))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
		return 1
	}
	if sum.Failed > 0 {
		return 1
	}
	return 0
}

// kubeModule returns the Kubernetes module's directory in the module
// cache (hack/kube/build.sh downloaded it).
func kubeModule(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@"+localkube.Version)
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("the Kubernetes module: %w", err)
	}
	return dir, nil
}

// buildStatic builds one of the test images' programs (pkg, statically)
// and returns it.
func buildStatic(ctx context.Context, repo, dir, pkg string) ([]byte, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build %s: %w: %s", pkg, err, out)
	}
	defer func() { _ = os.Remove(bin) }()
	return os.ReadFile(bin)
}

// writeReports reads ginkgo's JUnit report in dir and writes there
// results.txt (a line per test, the summary last) and areas.md (a table
// of the areas), printing each failure; it returns the summary.
func writeReports(dir string) (conformance.Summary, error) {
	results, err := conformance.ReadJUnitFile(filepath.Join(dir, "junit.xml"))
	if err != nil {
		return conformance.Summary{}, err
	}
	write := func(name string, fn func(*os.File) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		return errors.Join(fn(f), f.Close())
	}
	if err := write("results.txt", func(f *os.File) error { return conformance.WriteResults(f, results) }); err != nil {
		return conformance.Summary{}, err
	}
	if err := write("areas.md", func(f *os.File) error { return conformance.WriteAreas(f, conformance.Areas(results)) }); err != nil {
		return conformance.Summary{}, err
	}
	for _, r := range results {
		if r.Outcome == conformance.Failed {
			_, _ = fmt.Fprintf(os.Stdout, "FAIL %s\n     %s\n", r.Name, r.Message)
		}
	}
	return conformance.Summarize(results), nil
}
