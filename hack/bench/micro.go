package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
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
		cmd := exec.CommandContext(ctx, goCmd(), args...)
		cmd.Dir = b.repo
		data, err := cmd.CombinedOutput()
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
