package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// microPackages are the Go benchmarks of the report: the planner and the
// spec hash in engine/plan, the status in engine/podstatus, the
// conversions in convert, the store's reads behind GetPod and ListPods,
// and the memory an idle watch holds (store watcher, WatchPods stream).
// A package whose pattern matches no benchmark is an error of the run.
var microPackages = []struct{ pkg, pattern string }{
	{"./engine/plan", "^(BenchmarkComputePodActions|BenchmarkContainerHash)$"},
	{"./engine/podstatus", "^BenchmarkComputePodStatus$"},
	{"./convert", "^(BenchmarkManifestToProto|BenchmarkDecode|BenchmarkDefault|BenchmarkPodToProto|BenchmarkPodToProtoWithStatus|BenchmarkPodFromProto)$"},
	{"./engine/store", "^(BenchmarkList|BenchmarkGetByName|BenchmarkIdleWatchers)$"},
	{"./server", "^BenchmarkIdleWatchPodsStreams$"},
}

// microResult is one benchmark: ns/op, B/op and allocs/op of each count,
// and a bytes/… metric of its own (b.ReportMetric) if it has one.
type microResult struct {
	pkg, name     string
	ns, b, allocs sample
	per           sample
	perUnit       string
	order         int
}

// microBench runs the benchmarks with go test -bench -benchmem -count.
func (b *bench) microBench(ctx context.Context) ([]*microResult, []string) {
	var out []*microResult
	var errs []string
	for _, p := range microPackages {
		args := []string{"test", "-run", "^$", "-bench", p.pattern, "-benchmem",
			"-count", strconv.Itoa(b.cfg.microCount), "-benchtime", b.cfg.microTime, p.pkg}
		data, err := b.microPackage(ctx, p.pkg, args)
		if err != nil {
			errs = append(errs, fmt.Sprintf("go %s: %v: %s", strings.Join(args, " "), err, tailString(string(data), 1500)))
			continue
		}
		res := parseBench(strings.TrimPrefix(p.pkg, "./"), string(data))
		if len(res) == 0 {
			errs = append(errs, fmt.Sprintf("go %s: no benchmark matched %s", strings.Join(args, " "), p.pattern))
			continue
		}
		out = append(out, res...)
	}
	return out, errs
}

// microPackageTimeout bounds one package's go test -bench. Go's
// -test.timeout does not cover benchmarks, so a benchmark that waits
// forever would hold the whole report back (BenchmarkIdleWatchPodsStreams
// did, waiting for an event the store's throttle held back).
const microPackageTimeout = 10 * time.Minute

// microPackage runs go test args for pkg with microPackageTimeout: past
// it the test binary gets SIGQUIT (its goroutines' stacks end the output)
// and is killed 15 s later. The whole output is kept in
// .tmp/bench/logs/micro-<pkg>.log.
func (b *bench) microPackage(ctx context.Context, pkg string, args []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, microPackageTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd(), args...)
	cmd.Dir = b.repo
	// go test runs the test binary as its child: the signal goes to the
	// process group, which reaches both.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGQUIT) }
	cmd.WaitDelay = 15 * time.Second
	data, err := cmd.CombinedOutput()
	logDir := benchLogDir(b.repo)
	logFile := filepath.Join(logDir, "micro-"+strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "-")+".log")
	if mkErr := os.MkdirAll(logDir, 0o755); mkErr == nil {
		if wErr := os.WriteFile(logFile, data, 0o644); wErr != nil {
			b.log.Warn("keep the benchmark's output", zap.String("file", logFile), zap.Error(wErr))
		}
	}
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("stopped after %s (its goroutines' stacks are in %s): %w", microPackageTimeout, logFile, err)
	}
	return data, err
}

// parseBench parses go test -bench -benchmem output.
func parseBench(pkg, out string) []*microResult {
	byName := map[string]*microResult{}
	var order []*microResult
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		// Drop the -GOMAXPROCS suffix.
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		r := byName[name]
		if r == nil {
			r = &microResult{pkg: pkg, name: name, order: len(order)}
			byName[name] = r
			order = append(order, r)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				r.ns.add(v)
			case "B/op":
				r.b.add(v)
			case "allocs/op":
				r.allocs.add(v)
			default:
				if strings.HasPrefix(f[i+1], "bytes/") {
					r.per.add(v)
					r.perUnit = f[i+1]
				}
			}
		}
	}
	return order
}

// goCmd finds the go command (a root shell's PATH may lack it).
func goCmd() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

func tailString(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
