package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/podsync/podsync/internal/testing/localkube"
)

// The cluster benchmark (make bench-cluster, -cluster): a podsync node
// behind podsync-vk and a real kubelet registered with the same API
// server, each on a private containerd of the same flavour, timed in
// interleaved rounds (issue 40).

// clusterReportFile is the cluster benchmark's report, beside
// BENCHMARKS.md (which links it).
const clusterReportFile = "BENCHMARKS-cluster.md"

// clusterConfig is what the -cluster flags ask for.
type clusterConfig struct {
	enabled bool
	// ns are the replica counts each Deployment is scaled to from 0.
	ns []int
	// rounds is how many interleaved rounds run at each count.
	rounds int
	// samples is how many kubectl logs and kubectl exec calls a run times.
	samples int
	// rateLimit keeps podsyncd's default rate limit of mutating calls
	// per identity; otherwise it is off, as in the single-node bench.
	rateLimit bool
}

// addClusterFlags declares the -cluster flags on fs; parse checks them
// once fs is parsed.
func addClusterFlags(fs *flag.FlagSet, cfg *config) (parse func() error) {
	fs.BoolVar(&cfg.cluster.enabled, "cluster", false, "run the cluster benchmark (make bench-cluster): a podsync node and a kubelet node in one cluster; writes "+clusterReportFile)
	ns := fs.String("cluster-n", "30,100", "replica counts the cluster benchmark scales each node's Deployment to from 0")
	fs.IntVar(&cfg.cluster.rounds, "cluster-rounds", 3, "interleaved rounds of the cluster benchmark at each count")
	fs.IntVar(&cfg.cluster.samples, "cluster-samples", 5, "kubectl logs and kubectl exec calls timed in each run of the cluster benchmark")
	fs.BoolVar(&cfg.cluster.rateLimit, "cluster-rate-limit", false, "keep podsyncd's default rate limit of mutating calls (20/s, burst 40) towards podsync-vk; off by default, as in the single-node bench")
	return func() error {
		cc := &cfg.cluster
		cc.ns = nil
		for _, f := range strings.Split(*ns, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > clusterMaxPods {
				return fmt.Errorf("-cluster-n %q: want numbers from 1 to %d", *ns, clusterMaxPods)
			}
			cc.ns = append(cc.ns, n)
		}
		slices.Sort(cc.ns)
		cc.ns = slices.Compact(cc.ns)
		switch {
		case cc.rounds < 1:
			return fmt.Errorf("-cluster-rounds %d: want at least 1", cc.rounds)
		case cc.samples < 1:
			return fmt.Errorf("-cluster-samples %d: want at least 1", cc.samples)
		case cc.enabled && cfg.scale.enabled:
			return fmt.Errorf("-cluster and -scale: one benchmark at a time")
		}
		return nil
	}
}

// clusterMaxPods bounds -cluster-n: both nodes admit 110 pods, the
// kubelet's default maxPods and podsyncd's.
const clusterMaxPods = 105

// clusterNode is which node a run is on.
type clusterNode string

const (
	nodePodsync clusterNode = "podsync"
	nodeKubelet clusterNode = "kubelet"
)

// The nodes' names in the cluster.
const (
	podsyncNodeName = "podsync-a"
	kubeletNodeName = "kubelet-a"
)

// clusterRun is one run of one node at one count: its Deployment scaled
// from 0 to pods, one pod deleted, kubectl logs and exec, and the
// Deployment scaled back to 0. Times are in ms.
type clusterRun struct {
	node  clusterNode
	round int
	pods  int
	// allReady is from the scale call to the last pod Ready; latencies
	// are each pod's creation → Ready as the watch saw them.
	allReady  float64
	latencies []float64
	// replacement is from the delete call to its replacement Ready;
	// deletedGone from the delete call to the deleted pod's object gone.
	replacement, deletedGone float64
	// logs and exec are the wall times of the kubectl calls.
	logs, exec []float64
	// scaleDownGone is from the scale to 0 to the last pod object gone.
	scaleDownGone float64
	// upCPU and downCPU are where the CPU went from the scale to N to
	// the last pod Ready, and from the scale to 0 to the last object
	// gone (cluster_cpu.go); cpuErr says why they are missing.
	upCPU, downCPU cpuUse
	cpuErr         string
	err            string
}

// clusterResults is what BENCHMARKS-cluster.md is made of.
type clusterResults struct {
	started, finished     time.Time
	loadBefore, loadAfter string
	machine               machine
	commit                string
	kubeVersion           string
	// kubeletVersion is what the kubelet says of itself; runtime is the
	// containerds' "containerd v2.4.2".
	kubeletVersion, runtime string
	// kubeletErr is why the kubelet could not be built or started: its
	// columns say so and the run fails.
	kubeletErr string
	// setupErr is why nothing could run.
	setupErr string
	runs     []*clusterRun
}

// failed reports whether the run must exit non-zero: the kubelet or the
// setup failed, or a run did.
func (r *clusterResults) failed() bool {
	if r.kubeletErr != "" || r.setupErr != "" {
		return true
	}
	return slices.ContainsFunc(r.runs, func(c *clusterRun) bool { return c.err != "" })
}

// clusterBench is one run of the cluster benchmark.
type clusterBench struct {
	log  *zap.Logger
	cfg  config
	repo string
	dir  string // .tmp/bench-cluster
}

// runClusterMain runs the cluster benchmark and writes its report; it
// returns the exit code.
func runClusterMain(ctx context.Context, log *zap.Logger, repo string, cfg config) int {
	b := &clusterBench{log: log, cfg: cfg, repo: repo, dir: filepath.Join(repo, ".tmp", "bench-cluster")}
	res := b.run(ctx)
	return writeRunReport(ctx, log, cfg.out, "cluster", func() string { return renderClusterReport(res, cfg) },
		res.finished.Sub(res.started), res.failed())
}

// run starts the cluster and runs every round: at each count, both
// nodes, the podsync node first in odd rounds and the kubelet's in even
// ones.
func (b *clusterBench) run(ctx context.Context) *clusterResults {
	res := &clusterResults{started: time.Now(), loadBefore: loadAvg(), machine: machineFacts(), commit: gitCommit(b.repo),
		kubeVersion: localkube.Version}
	defer func() {
		res.finished = time.Now()
		res.loadAfter = loadAvg()
	}()
	env, err := b.setup(ctx, res)
	if env != nil {
		defer func() {
			if err := env.close(context.WithoutCancel(ctx)); err != nil {
				b.log.Error("cluster cleanup", zap.Error(err))
			}
		}()
	}
	if err != nil {
		res.setupErr = err.Error()
		b.log.Error("cluster benchmark setup", zap.Error(err))
		return res
	}
	cc := b.cfg.cluster
	for round := 1; round <= cc.rounds; round++ {
		for _, n := range cc.ns {
			for _, node := range roundOrder(round) {
				if ctx.Err() != nil {
					return res
				}
				r := &clusterRun{node: node, round: round, pods: n}
				res.runs = append(res.runs, r)
				if node == nodeKubelet && res.kubeletErr != "" {
					r.err = "no kubelet node: " + res.kubeletErr
					continue
				}
				b.log.Info("cluster run", zap.Int("round", round), zap.String("node", string(node)), zap.Int("pods", n))
				if err := env.workload(ctx, b.log, node, cc.samples, r); err != nil {
					r.err = err.Error()
					b.log.Error("cluster run failed", zap.String("node", string(node)), zap.Int("pods", n), zap.Error(err))
					// The next run starts from no pod.
					if err := env.reset(ctx, node); err != nil {
						b.log.Error("cluster run clean-up", zap.String("node", string(node)), zap.Error(err))
					}
				}
			}
		}
	}
	return res
}

// roundOrder is the order of the nodes in a round: alternating, so that
// neither always runs on a machine the other just loaded.
func roundOrder(round int) []clusterNode {
	if round%2 == 1 {
		return []clusterNode{nodePodsync, nodeKubelet}
	}
	return []clusterNode{nodeKubelet, nodePodsync}
}
