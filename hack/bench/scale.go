package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/podsync/podsync/internal/testing/localkube"
	"github.com/podsync/podsync/logx"
)

// The scale benchmark (make bench-scale, -scale): hollow podsync nodes
// behind podsync-vk against kwok's simulated nodes on the same control
// plane settings (issue 40).

// scaleDefaultKwok is the kwok the scale benchmark builds (make bench-scale's
// KWOK_VERSION).
const scaleDefaultKwok = "v0.8.0"

// scaleConfig is what the -scale flags ask for.
type scaleConfig struct {
	enabled bool
	// nodes are the node counts, each run for both systems.
	nodes []int
	// pods is the pods per node.
	pods int
	// vks is how many podsync-vk processes serve the hollow nodes.
	vks int
	// spread leaves placement to the scheduler; else each Deployment is
	// pinned to its node.
	spread bool
	// runs is how many interleaved rounds run at each node count.
	runs        int
	kwokVersion string
	// idle is how long the agents' CPU is measured with nothing asked of
	// them, before the pods and once they all run; 0 skips it.
	idle time.Duration
	// nodeState is where the hollow nodes keep their state (a directory
	// of each run's, removed after it); empty: in the run's log
	// directory, on the disk.
	nodeState string
}

// addScaleFlags declares the -scale flags on fs; parse turns them into
// cfg.scale once fs is parsed.
func addScaleFlags(fs *flag.FlagSet, cfg *config) (parse func() error) {
	fs.BoolVar(&cfg.scale.enabled, "scale", false, "run the scale benchmark (make bench-scale): hollow podsync nodes behind podsync-vk against kwok; writes BENCHMARKS-scale.md")
	nodes := fs.String("scale-nodes", "25,50,100", "node counts of the scale benchmark")
	fs.IntVar(&cfg.scale.pods, "scale-pods", 30, "pods per node of the scale benchmark")
	fs.IntVar(&cfg.scale.vks, "scale-vks", 1, "podsync-vk processes serving the hollow nodes")
	placement := fs.String("scale-placement", "pinned", "pinned (a Deployment per node, with a nodeSelector) or spread (by the scheduler)")
	fs.IntVar(&cfg.scale.runs, "scale-runs", 1, "interleaved rounds at each node count")
	fs.DurationVar(&cfg.scale.idle, "scale-idle", 15*time.Second, "how long the agents' CPU is measured idle, before the pods and once they run (0: not measured)")
	fs.StringVar(&cfg.scale.kwokVersion, "kwok-version", scaleDefaultKwok, "sigs.k8s.io/kwok version built from the Go module proxy into .tmp/kwok")
	nodeState := fs.String("scale-node-state", defaultNodeState, "where the hollow nodes keep their state (store, pod directories and volumes, logs): a tmpfs, as a hundred real nodes share no disk; \"disk\" keeps it with the run's logs")
	return func() error {
		sc := &cfg.scale
		sc.nodes = nil
		for _, f := range strings.Split(*nodes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 999 {
				return fmt.Errorf("-scale-nodes %q: want numbers from 1 to 999", *nodes)
			}
			sc.nodes = append(sc.nodes, n)
		}
		slices.Sort(sc.nodes)
		sc.nodes = slices.Compact(sc.nodes)
		switch {
		case sc.pods < 1 || sc.pods > 100:
			return fmt.Errorf("-scale-pods %d: want 1 to 100 (a node's pods capacity is 110)", sc.pods)
		case sc.vks < 1 || sc.vks > sc.nodes[0]:
			return fmt.Errorf("-scale-vks %d: want 1 to the smallest node count, %d", sc.vks, sc.nodes[0])
		case sc.runs < 1:
			return fmt.Errorf("-scale-runs %d: want at least 1", sc.runs)
		case sc.idle < 0:
			return fmt.Errorf("-scale-idle %s: want a duration of 0 or more", sc.idle)
		case *placement != "pinned" && *placement != "spread":
			return fmt.Errorf("-scale-placement %q: want pinned or spread", *placement)
		case !strings.HasPrefix(sc.kwokVersion, "v"):
			return fmt.Errorf("-kwok-version %q: want a module version such as %s", sc.kwokVersion, scaleDefaultKwok)
		}
		sc.spread = *placement == "spread"
		sc.nodeState = *nodeState
		if sc.nodeState == "disk" {
			sc.nodeState = ""
		} else if fi, err := os.Stat(sc.nodeState); sc.enabled && (err != nil || !fi.IsDir()) {
			return fmt.Errorf("-scale-node-state %q: want a directory (a tmpfs such as /dev/shm) or disk", *nodeState)
		}
		return nil
	}
}

// defaultNodeState is where the hollow nodes keep their state unless
// -scale-node-state says otherwise: a tmpfs. On the machine's one disk a
// hundred of them share its journal, and ext4 making each pod's
// directories and files was most of a hollow node's CPU (6.7–8.7 ms a pod
// on disk against 3.0 on /dev/shm, 100 pods on one node); a real node has
// a disk of its own.
const defaultNodeState = "/dev/shm"

// scaleSystem is what runs the nodes.
type scaleSystem string

const (
	sysKwok    scaleSystem = "kwok"
	sysPodsync scaleSystem = "podsync"
)

// scaleRun is one run of one system at one node count.
type scaleRun struct {
	sys   scaleSystem
	nodes int
	pods  int // all pods of the run
	// latencies are each pod's creation → Running as a watch saw them,
	// in ms; allRunning is from the first Deployment's creation to the
	// last pod Running, in ms.
	latencies  []float64
	allRunning float64
	// scheduled and started split latencies (podWatch.split): creation →
	// bound to a node, and bound → Running.
	scheduled, started []float64
	// agent is podsync-vk (every process of it) or kwok: its CPU over
	// the workload (ms) and its RSS before and after it (bytes).
	agentCPU                      float64
	agentRSSBefore, agentRSSAfter int64
	// requests are the API server's requests during the workload: the
	// agent's by kind (its flow schemas) and everyone's; watches are the
	// WATCH requests open after the workload beyond the control plane's
	// own.
	agentByKind          requestCounts
	allRequests, watches float64
	// nodeRSS and nodeCPU are the hollow podsyncds' summed RSS after the
	// workload and CPU over it (podsync only).
	nodeRSS int64
	nodeCPU float64
	// idle is the agent's CPU with nothing asked of it, in ms per second
	// per node served: before the pods and once they all run;
	// nodeIdle the same of the hollow podsyncds (podsync only). Unset
	// (NaN) when not measured.
	idle, nodeIdle idleCPU
	// refused is how many calls the hollow podsyncds refused with
	// RESOURCE_EXHAUSTED (their per-identity rate limit), from their
	// logs (podsync only).
	refused int
	err     string
}

// scaleResults is what BENCHMARKS-scale.md is made of.
type scaleResults struct {
	started, finished     time.Time
	loadBefore, loadAfter string
	machine               machine
	commit                string
	kubeVersion           string
	kwokVersion           string
	// kwokErr is why kwok could not be built: its columns say so and the
	// run fails.
	kwokErr string
	// setupErr is why nothing could run.
	setupErr string
	runs     []*scaleRun
}

// failed reports whether the run must exit non-zero: kwok or the setup
// failed, or a run did.
func (r *scaleResults) failed() bool {
	if r.kwokErr != "" || r.setupErr != "" {
		return true
	}
	return slices.ContainsFunc(r.runs, func(s *scaleRun) bool { return s.err != "" })
}

// scaleBench is one run of the scale benchmark.
type scaleBench struct {
	log  *zap.Logger
	cfg  config
	repo string
	dir  string // .tmp/bench-scale
	// kubeBin, hollowBin, vkBin, kwokBin and kwokStages are what the runs
	// start.
	kubeBin, hollowBin, vkBin, kwokBin, kwokStages string
}

// runScaleMain runs the scale benchmark and writes its report; it returns
// the exit code.
func runScaleMain(ctx context.Context, log *zap.Logger, repo string, cfg config) int {
	b := &scaleBench{log: log, cfg: cfg, repo: repo, dir: filepath.Join(repo, ".tmp", "bench-scale")}
	res := b.run(ctx)
	return writeRunReport(ctx, log, cfg.out, "scale", func() string { return renderScaleReport(res, cfg) },
		res.finished.Sub(res.started), res.failed())
}

// writeRunReport writes the report of a benchmark run (what: "scale",
// "cluster") to out and returns the exit code: 1 when the run was
// interrupted (no report), the report cannot be written or the run
// failed.
func writeRunReport(ctx context.Context, log *zap.Logger, out, what string, render func() string, took time.Duration, failed bool) int {
	if ctx.Err() != nil {
		log.Error("interrupted: no report written")
		return 1
	}
	if err := os.WriteFile(out, []byte(render()), 0o644); err != nil {
		log.Error("write report", zap.Error(err))
		return 1
	}
	log.Info("report written", zap.String("path", out), zap.Duration("took", took.Round(time.Second)))
	if failed {
		log.Error("the " + what + " benchmark failed; the report says why")
		return 1
	}
	return 0
}

// run prepares the binaries and runs every round: at each node count,
// kwok, then podsync.
func (b *scaleBench) run(ctx context.Context) *scaleResults {
	res := &scaleResults{started: time.Now(), loadBefore: loadAvg(), machine: machineFacts(), commit: gitCommit(b.repo),
		kubeVersion: localkube.Version, kwokVersion: b.cfg.scale.kwokVersion}
	defer func() {
		res.finished = time.Now()
		res.loadAfter = loadAvg()
	}()
	if err := b.prepare(ctx, res); err != nil {
		res.setupErr = err.Error()
		b.log.Error("scale benchmark setup", zap.Error(err))
		return res
	}
	sc := b.cfg.scale
	for round := range sc.runs {
		for _, n := range sc.nodes {
			for _, sys := range []scaleSystem{sysKwok, sysPodsync} {
				if ctx.Err() != nil {
					return res
				}
				r := &scaleRun{sys: sys, nodes: n, pods: n * sc.pods}
				res.runs = append(res.runs, r)
				if sys == sysKwok && res.kwokErr != "" {
					r.err = "kwok could not be built: " + res.kwokErr
					continue
				}
				b.log.Info("scale run", zap.Int("round", round+1), zap.String("system", string(sys)), zap.Int("nodes", n),
					zap.Int("pods", r.pods))
				var err error
				if sys == sysKwok {
					err = b.runKwok(ctx, r)
				} else {
					err = b.runPodsync(ctx, r)
				}
				if err != nil {
					r.err = err.Error()
					b.log.Error("scale run failed", zap.String("system", string(sys)), zap.Int("nodes", n), zap.Error(err))
				}
			}
		}
	}
	return res
}

// prepare finds or builds the control plane's binaries, podsync-vk, the
// hollow node and kwok. A kwok that cannot be built is recorded, not
// fatal: the podsync runs go on and the report says why kwok's columns
// are empty.
func (b *scaleBench) prepare(ctx context.Context, res *scaleResults) error {
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return err
	}
	var err error
	if b.kubeBin, err = localkube.Build(ctx, b.repo, os.Stderr); err != nil {
		return err
	}
	bin := filepath.Join(b.dir, "bin")
	b.hollowBin, b.vkBin = filepath.Join(bin, "podsyncd-hollow"), filepath.Join(bin, "podsync-vk")
	for pkg, out := range map[string]string{"./hack/hollow": b.hollowBin, "./cmd/podsync-vk": b.vkBin} {
		if err := goBuild(ctx, b.repo, out, pkg); err != nil {
			return err
		}
	}
	if b.kwokBin, b.kwokStages, err = buildKwok(ctx, b.repo, b.cfg.scale.kwokVersion); err != nil {
		res.kwokErr = err.Error()
		b.log.Error("kwok", zap.Error(err))
	}
	return nil
}

// errNotAllRunning is the error of a run whose pods were not all Running
// in time.
var errNotAllRunning = errors.New("not every pod Running in time")

// scaleReportFile is the scale benchmark's report, beside BENCHMARKS.md
// (which links it).
const scaleReportFile = "BENCHMARKS-scale.md"

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// countRefused counts the calls the podsyncds logging to paths refused
// with RESOURCE_EXHAUSTED: the gRPC middleware logs each such call at
// warn, the level the hollow nodes log at (as JSON or, the hollow
// nodes' default, zap's console format).
func countRefused(paths []string) (int, error) {
	n := 0
	re := regexp.MustCompile(`"` + logx.GRPCCode + `": ?"` + codes.ResourceExhausted.String() + `"`)
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return 0, fmt.Errorf("count the refused calls: %w", err)
		}
		n += len(re.FindAllIndex(data, -1))
	}
	return n, nil
}
