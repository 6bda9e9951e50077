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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"

	"github.com/podsync/podsync/engine/watch"
	"github.com/podsync/podsync/internal/testing/localcri"
)

// allSections are the sections -sections selects from, in run order.
var allSections = []string{"micro", "run", "latency", "api", "restart", "idle"}

// config is what the flags ask for.
type config struct {
	quick       bool
	out         string
	runs        int
	runsLarge   int
	ns          []int
	flavours    []localcri.Flavour
	sections    map[string]bool
	profileDir  string
	podsyncd    string
	latSamples  int
	apiPods     int
	apiBatch    int
	apiClients  int
	apiDuration time.Duration
	microCount  int
	microTime   string
	deadline    time.Duration
	kubelet     string        // -kubelet: the kubelet binary (default: hack/kube/build.sh kubelet)
	idleWindow  time.Duration // -idle-window
	scale       scaleConfig   // -scale and its flags (scale.go)
	cluster     clusterConfig // -cluster and its flags (cluster.go)
	args        []string
}

// bench is one run of the program.
type bench struct {
	log   *zap.Logger
	cfg   config
	repo  string
	start time.Time
	// kubeletBin is the kubelet the run, restart and idle sections
	// compare with.
	kubeletBin string
}

// pastDeadline reports whether the run is past -deadline: later rounds
// and sections are skipped (and reported so) to bound a run on a machine
// much slower than planned.
func (b *bench) pastDeadline() bool {
	return b.cfg.deadline > 0 && time.Since(b.start) > b.cfg.deadline
}

// flavourResult is everything measured on one containerd flavour.
type flavourResult struct {
	flavour localcri.Flavour
	version string
	full    bool // the full matrix ran on it
	err     string
	runs    []*runResult
	latency *latencyResult
	api     *apiResult
	restart *restartResult
	idle    *idleResult
}

// results is what the report is made of.
type results struct {
	started, finished time.Time
	loadBefore        string
	loadAfter         string
	machine           machine
	micro             []*microResult
	microErrs         []string
	flavours          []*flavourResult
	commit            string
	// kubeletErr is why no kubelet could be found or built;
	// kubeletVersion is what the kubelet compared says of itself.
	kubeletErr, kubeletVersion string
}

func main() {
	os.Exit(run())
}

func run() int {
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		zapcore.Lock(os.Stderr), zap.InfoLevel))
	defer func() { _ = log.Sync() }()
	// k8s.io/cri-client logs failed calls through klog; errors are
	// returned and reported here.
	klog.SetLogger(logr.Discard())

	repo, err := localcri.RepoDir()
	if err != nil {
		log.Error("no repository", zap.Error(err))
		return 1
	}
	cfg, err := parseFlags(os.Args[1:], repo)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		log.Error("bad flags", zap.Error(err))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.scale.enabled {
		// Hollow nodes and kwok: no containerd, no root.
		return runScaleMain(ctx, log, repo, cfg)
	}
	if os.Geteuid() != 0 {
		log.Error("bench runs containerd and needs root: run it as root (sudo -E make bench)")
		return 1
	}
	if cfg.cluster.enabled {
		// A control plane, a podsync node and a kubelet node.
		return runClusterMain(ctx, log, repo, cfg)
	}
	b := &bench{log: log, cfg: cfg, repo: repo, start: time.Now()}
	res, err := b.run(ctx)
	if ctx.Err() != nil {
		log.Error("interrupted: no report written")
		return 1
	}
	if err != nil {
		log.Error("bench failed", zap.Error(err))
	}
	if res != nil {
		if werr := os.WriteFile(cfg.out, []byte(renderReport(res, cfg)), 0o644); werr != nil {
			log.Error("write report", zap.Error(werr))
			return 1
		}
		log.Info("report written", zap.String("path", cfg.out), zap.Duration("took", res.finished.Sub(res.started).Round(time.Second)))
	}
	if err != nil {
		return 1
	}
	// Failed rows are in the report; a section that could not run at all
	// fails the run too.
	if res != nil && res.sectionFailed() {
		return 1
	}
	return 0
}

// sectionFailed reports whether a section could not run at all: the
// micro-benchmarks failed, or a flavour's containerd or podsyncd did not
// start.
func (r *results) sectionFailed() bool {
	if len(r.microErrs) > 0 || r.kubeletErr != "" {
		return true
	}
	for _, fr := range r.flavours {
		if fr.err != "" || fr.kubeletFailed() {
			return true
		}
	}
	return false
}

func parseFlags(args []string, repo string) (config, error) {
	cfg := config{args: args}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.BoolVar(&cfg.quick, "quick", false, "fewer runs and smaller N, for development")
	fs.IntVar(&cfg.runsLarge, "runs-large", minVerdictRounds, "runs per pods-to-running row at N ≥ 100 (at most -runs; a target's verdict needs 7)")
	fs.StringVar(&cfg.out, "out", filepath.Join(repo, "BENCHMARKS.md"), "report file")
	fs.IntVar(&cfg.runs, "runs", 0, "runs per measured row (default 7, the rounds a target's verdict needs; quick 2)")
	flavours := fs.String("flavours", "2,1.6", "containerd flavours; the full matrix runs on the first")
	sections := fs.String("sections", strings.Join(allSections, ","), "sections to run")
	fs.StringVar(&cfg.kubelet, "kubelet", "", "kubelet binary for the run, restart and idle sections (default: built by hack/kube/build.sh kubelet)")
	fs.DurationVar(&cfg.idleWindow, "idle-window", 0, "how long the idle node is measured (default 60s, quick 20s)")
	fs.StringVar(&cfg.profileDir, "profile", "", "directory for podsyncd CPU and heap profiles, and with -scale podsync-vk's CPU profile of each run's first 30s of pod creation (none when empty)")
	fs.StringVar(&cfg.podsyncd, "podsyncd", "", "podsyncd binary (default: built into .tmp/bench)")
	fs.DurationVar(&cfg.deadline, "deadline", 0, "skip rounds and sections that would start later than this after the start (default 150m, quick 15m: the kubelet rows, the floor's pieces and N = 100 make a long run)")
	apiPods := fs.Int("api-pods", 0, "running pods under API load (default 250, quick 40)")
	nList := fs.String("n", "", "pods per pods-to-running run, comma-separated (default 1,10,30,100; quick 1,10)")
	parseScale := addScaleFlags(fs, &cfg)
	parseCluster := addClusterFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if err := errors.Join(parseScale(), parseCluster()); err != nil {
		return cfg, err
	}
	switch {
	case flagSet(fs, "out"):
	case cfg.scale.enabled:
		cfg.out = filepath.Join(repo, scaleReportFile)
	case cfg.cluster.enabled:
		cfg.out = filepath.Join(repo, clusterReportFile)
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, f := range strings.Split(*flavours, ",") {
		fl, err := localcri.ParseFlavour(strings.TrimSpace(f))
		if err != nil {
			return cfg, err
		}
		cfg.flavours = append(cfg.flavours, fl)
	}
	cfg.sections = map[string]bool{}
	for _, s := range strings.Split(*sections, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(allSections, s) {
			return cfg, fmt.Errorf("-sections: unknown section %q (%s)", s, strings.Join(allSections, ", "))
		}
		cfg.sections[s] = true
	}
	if cfg.quick {
		cfg.ns = []int{1, 10}
		cfg.latSamples = 3
		cfg.apiPods, cfg.apiBatch, cfg.apiDuration = 40, 20, 3*time.Second
		cfg.microCount, cfg.microTime = 1, "200ms"
		if cfg.deadline == 0 {
			cfg.deadline = 15 * time.Minute
		}
		if cfg.runs == 0 {
			cfg.runs = 2
		}
		if cfg.idleWindow == 0 {
			cfg.idleWindow = 20 * time.Second
		}
	} else {
		cfg.ns = []int{1, 10, 30, largeN}
		cfg.latSamples = 5
		cfg.apiPods, cfg.apiBatch, cfg.apiDuration = 250, 50, 10*time.Second
		cfg.microCount, cfg.microTime = 5, "1s"
		if cfg.deadline == 0 {
			// A whole run took 2h10m on a 2-core machine (12-06).
			cfg.deadline = 150 * time.Minute
		}
		if cfg.runs == 0 {
			cfg.runs = minVerdictRounds
		}
		if cfg.idleWindow == 0 {
			cfg.idleWindow = time.Minute
		}
	}
	cfg.apiClients = 8
	if *apiPods > 0 {
		if *apiPods > benchMaxPods-10 {
			return cfg, fmt.Errorf("-api-pods %d: at most %d (podsyncd runs with --max-pods=%d)", *apiPods, benchMaxPods-10, benchMaxPods)
		}
		cfg.apiPods = *apiPods
	}
	if *nList != "" {
		cfg.ns = nil
		for _, f := range strings.Split(*nList, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 256 {
				return cfg, fmt.Errorf("-n %q: want numbers from 1 to 256", *nList)
			}
			cfg.ns = append(cfg.ns, n)
		}
	}
	if cfg.profileDir != "" {
		abs, err := filepath.Abs(cfg.profileDir)
		if err != nil {
			return cfg, err
		}
		cfg.profileDir = abs
	}
	return cfg, nil
}

// run runs the sections: the micro-benchmarks first (no runtime running),
// then, per flavour, its containerd and podsyncd, the full matrix on the
// first flavour and the latency rows on the others.
func (b *bench) run(ctx context.Context) (*results, error) {
	res := &results{started: time.Now(), loadBefore: loadAvg(), machine: machineFacts(), commit: gitCommit(b.repo)}
	defer func() {
		res.finished = time.Now()
		res.loadAfter = loadAvg()
		if res.machine.runc == "" {
			// runc is installed with the first flavour's runtime, after
			// the facts above were read on a fresh machine.
			res.machine.runc = runcVersion()
		}
	}()
	// Logs of earlier runs (podsyncd-<id>.log, containerd-<id>.log,
	// micro-<pkg>.log).
	if old, err := filepath.Glob(filepath.Join(benchLogDir(b.repo), "*.log")); err == nil {
		for _, f := range old {
			_ = os.Remove(f)
		}
	}
	if b.cfg.sections["micro"] {
		b.log.Info("micro-benchmarks")
		res.micro, res.microErrs = b.microBench(ctx)
	}
	needRuntime := b.cfg.sections["run"] || b.cfg.sections["latency"] || b.cfg.sections["api"] ||
		b.cfg.sections["restart"] || b.cfg.sections["idle"]
	if !needRuntime || ctx.Err() != nil {
		return res, ctx.Err()
	}
	if b.cfg.sections["run"] || b.cfg.sections["restart"] || b.cfg.sections["idle"] {
		kb, kv, err := b.findKubelet(ctx)
		if err != nil {
			res.kubeletErr = err.Error()
			return res, err
		}
		b.kubeletBin, res.kubeletVersion = kb, kv
	}
	bin := b.cfg.podsyncd
	if bin == "" {
		bin = filepath.Join(b.repo, ".tmp", "bench", "podsyncd")
		b.log.Info("building podsyncd", zap.String("path", bin))
		cmd := exec.CommandContext(ctx, goCmd(), "build", "-o", bin, "./cmd/podsyncd")
		cmd.Dir = b.repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return res, fmt.Errorf("build podsyncd: %w: %s", err, out)
		}
	}
	for i, fl := range b.cfg.flavours {
		res.flavours = append(res.flavours, &flavourResult{flavour: fl, full: i == 0})
	}
	// The other flavours' few rows (N = 1, status latency, restart) run
	// first: -deadline then trims the last rounds of the full flavour's
	// long ones (N = 100, the idle node) rather than every row of the
	// others, as it did when they came last. The report keeps the
	// flavours' order.
	for _, fr := range slices.Concat(res.flavours[1:], res.flavours[:1]) {
		if ctx.Err() != nil {
			break
		}
		b.runFlavour(ctx, fr, bin)
	}
	return res, ctx.Err()
}

func (b *bench) runFlavour(ctx context.Context, fr *flavourResult, bin string) {
	log := b.log.With(zap.String("flavour", string(fr.flavour)))
	log.Info("starting containerd and podsyncd")
	e, err := startEnv(ctx, b.log, b.repo, fr.flavour, bin)
	if err != nil {
		fr.err = err.Error()
		log.Error("environment", zap.Error(err))
		return
	}
	defer e.close(context.WithoutCancel(ctx))
	fr.version = e.version
	if err := e.cleanAll(ctx); err != nil {
		fr.err = "initial cleanup: " + err.Error()
		return
	}
	if b.cfg.sections["run"] {
		ns := b.cfg.ns
		if !fr.full {
			ns = ns[:1]
		}
		fr.runs = b.podsToRunning(ctx, e, ns, fr.full)
	}
	if b.cfg.sections["latency"] && ctx.Err() == nil {
		if err := e.ensurePodsyncd(ctx); err != nil {
			fr.latency = &latencyResult{errs: []string{err.Error()}}
		} else if b.pastDeadline() {
			fr.latency = &latencyResult{errs: []string{"skipped: the run passed its -deadline"}}
		} else {
			fr.latency = b.statusLatency(ctx, e, b.cfg.latSamples)
		}
	}
	if b.cfg.sections["api"] && fr.full && ctx.Err() == nil {
		if err := e.ensurePodsyncd(ctx); err != nil {
			fr.api = &apiResult{pods: b.cfg.apiPods, clients: b.cfg.apiClients, errs: []string{err.Error()}}
		} else if b.pastDeadline() {
			fr.api = &apiResult{pods: b.cfg.apiPods, clients: b.cfg.apiClients, errs: []string{"skipped: the run passed its -deadline"}}
		} else {
			fr.api = b.apiLoad(ctx, e, b.cfg.apiPods, b.cfg.apiBatch, b.cfg.apiClients, b.cfg.apiDuration)
		}
	}
	if b.cfg.sections["restart"] && ctx.Err() == nil {
		fr.restart = b.restartAfterStop(ctx, e)
	}
	if b.cfg.sections["idle"] && fr.full && ctx.Err() == nil {
		fr.idle = b.idleNode(ctx, e)
	}
}

// machine is what the report says of the machine.
type machine struct {
	cpus     int
	model    string
	kernel   string
	memory   int64
	goVer    string
	runc     string
	relist   time.Duration
	evRelist time.Duration
}

func machineFacts() machine {
	m := machine{cpus: runtime.NumCPU(), goVer: runtime.Version(), memory: memTotal(),
		relist: watch.DefaultRelistPeriod, evRelist: watch.DefaultEventedRelistPeriod}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.model = strings.TrimSpace(v)
				break
			}
		}
	}
	m.runc = runcVersion()
	return m
}

// runcVersion is the first line of `runc --version`, or "" when there is
// no runc.
func runcVersion() string {
	out, err := exec.Command("runc", "--version").Output()
	if err != nil {
		return ""
	}
	v, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return v
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func gitCommit(repo string) string {
	out, err := exec.Command("git", "-C", repo, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// benchLogDir is where a run keeps its logs: .tmp/bench/logs.
func benchLogDir(repo string) string { return filepath.Join(repo, ".tmp", "bench", "logs") }
