package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// runResult is the pods-to-running rows of one N on one flavour.
type runResult struct {
	n     int
	concs []int // concurrencies of the raw baseline, N last
	// Times to running, ms.
	podsync, crictl sample
	raw             map[int]*sample
	// Ratios to the raw floor at concurrency N, per run.
	podsyncRatio, crictlRatio sample
	rawRatio                  map[int]*sample
	// CPU, ms per pod: podsyncd; containerd (with CNI plugins) and the
	// shims (with runc) in the podsync run and in the raw run at
	// concurrency N.
	podsyncdCPU sample
	// cpuInTicks is set when a run's podsyncd CPU had to be read in
	// clock ticks (a thread ended during it).
	cpuInTicks               bool
	ctrdPodsync, shimPodsync sample
	ctrdRaw, shimRaw         sample
	// calls are podsyncd's CRI calls by method ("cri/<method>") and sync
	// passes ("passes", "pass_seconds") per pod during the RunPods, from
	// its metrics.
	calls map[string]*sample
	// errs are failures outside a row (a runtime that could not be
	// cleaned ends the rounds).
	errs []string
	// profile is the CPU profile of one more RunPods, if taken.
	profile, profileErr string
	roundsDone          int
	// The kubelet column: its time to running (ms), podsync ÷ kubelet
	// per round, its CPU per pod and containerd's and the shims' under it.
	// kubeletFloor is kubelet ÷ the raw floor.
	kubelet, kubeletRatio, kubeletFloor  sample
	kubeletCPU, ctrdKubelet, shimKubelet sample
	// floor is the minimal floor and the cost of each piece (hasFloor).
	floor *floorResult
}

func newRunResult(n int) *runResult {
	r := &runResult{n: n, raw: map[int]*sample{}, rawRatio: map[int]*sample{}, calls: map[string]*sample{}}
	for _, c := range []int{1, 4} {
		if c < n && n < largeN {
			r.concs = append(r.concs, c)
		}
	}
	r.concs = append(r.concs, n)
	for _, c := range r.concs {
		r.raw[c], r.rawRatio[c] = &sample{}, &sample{}
	}
	return r
}

// podsToRunning measures N = ns on e: per round, a podsync run, the raw
// baseline at each concurrency and the crictl loop, in that order, each
// from a clean runtime and cleaned after (untimed).
func (b *bench) podsToRunning(ctx context.Context, e *env, ns []int, profile bool) []*runResult {
	log := b.log.With(zap.String("flavour", string(e.flavour)))
	b.warmUp(ctx, e)
	var out []*runResult
	for _, n := range ns {
		rr := newRunResult(n)
		out = append(out, rr)
		if err := e.ensurePodsyncd(ctx); err != nil {
			rr.errs = append(rr.errs, err.Error())
			continue
		}
		if err := e.cleanAll(ctx); err != nil {
			rr.errs = append(rr.errs, "runtime not clean before the first round: "+err.Error())
			continue
		}
		runs := b.cfg.runs
		if n >= largeN {
			runs = min(runs, b.cfg.runsLarge)
		}
		for round := 1; round <= runs && ctx.Err() == nil; round++ {
			if b.pastDeadline() {
				rr.errs = append(rr.errs, fmt.Sprintf("skipped rounds %d to %d: the run passed its -deadline", round, runs))
				break
			}
			if err := e.ensurePodsyncd(ctx); err != nil {
				rr.errs = append(rr.errs, err.Error())
				break
			}
			if err := b.round(ctx, e, rr); err != nil {
				rr.errs = append(rr.errs, err.Error())
				log.Error("round aborted", zap.Int("n", n), zap.Int("round", round), zap.Error(err))
				break
			}
			log.Info("round done", zap.Int("n", n), zap.Int("round", round),
				zap.String("podsync", rr.podsync.ms()), zap.String("raw", rr.raw[n].ms()), zap.String("crictl", rr.crictl.ms()),
				zap.String("kubelet", rr.kubelet.ms()))
		}
		if profile && n == ns[len(ns)-1] && b.cfg.profileDir != "" && ctx.Err() == nil {
			path := filepath.Join(b.cfg.profileDir, fmt.Sprintf("runpods-n%d-containerd%s.pprof", n, string(e.flavour)))
			if err := b.profileRunPods(ctx, e, n, rr.podsync.median(), path); err != nil {
				rr.profileErr = err.Error()
				log.Warn("profile", zap.Error(err))
			} else {
				rr.profile = path
			}
		}
	}
	return out
}

// warmPodsyncd runs one untimed RunPods of two pods through a podsyncd
// just started, and cleans the runtime after.
func (b *bench) warmPodsyncd(ctx context.Context, e *env) {
	warm := newPods("warm", 2)
	e.noteUIDs(uidsOf(warm)...)
	if req, err := runPodsRequest(warm); err == nil {
		if _, err := e.d.runPods(ctx, req); err != nil {
			b.log.Warn("podsyncd warm-up", zap.Error(err))
		}
	}
	if err := e.cleanAll(ctx); err != nil {
		b.log.Warn("warm-up cleanup", zap.Error(err))
	}
}

// warmUp runs and removes a few pods each way, untimed: the first
// sandboxes after containerd starts are slower (snapshots, CNI).
func (b *bench) warmUp(ctx context.Context, e *env) {
	for range 2 {
		warm := newPods("warm", 2)
		e.noteUIDs(uidsOf(warm)...)
		if req, err := runPodsRequest(warm); err == nil {
			_, _ = e.d.runPods(ctx, req)
		}
		pods := newPods("warm", 2)
		if raws, err := e.rawPods(pods); err == nil {
			_, _ = e.runRaw(ctx, raws, 2)
		}
		if err := e.cleanAll(ctx); err != nil {
			b.log.Warn("warm-up cleanup", zap.Error(err))
		}
	}
}

// round is one podsync run, one raw run per concurrency, the minimal
// floor's runs (floorRuns), one crictl run and one kubelet run of rr.n
// pods. Each round starts one run later than the one before: a run
// always coming first would always follow the last run's clean-up
// (containerd and the kernel still removing its pods, a stopped
// kubelet's cgroups), and the 12-06 report's N = 100 podsync rounds,
// always first, had the two slowest of any method. A failed run is
// recorded in its row; an error is returned only when the runtime
// cannot be cleaned.
func (b *bench) round(ctx context.Context, e *env, rr *runResult) error {
	podsyncMS, minimalMS, crictlMS, kubeletMS := math.NaN(), math.NaN(), math.NaN(), math.NaN()
	var rawMS map[int]float64
	runs := []func() error{
		func() (err error) { podsyncMS, err = podsyncRun(ctx, e, rr); return err },
		func() (err error) { rawMS, err = rawRuns(ctx, e, rr); return err },
	}
	if hasFloor(rr.n) {
		runs = append(runs, func() (err error) { minimalMS, err = floorRuns(ctx, e, rr); return err })
	}
	if rr.n < largeN {
		runs = append(runs, func() (err error) { crictlMS, err = crictlRun(ctx, e, rr); return err })
	}
	runs = append(runs, func() (err error) { kubeletMS, err = b.kubeletRun(ctx, e, rr); return err })
	first := rr.roundsDone % len(runs)
	for _, run := range slices.Concat(runs[first:], runs[:first]) {
		if err := run(); err != nil {
			return err
		}
	}
	rr.addRatios(podsyncMS, crictlMS, rawMS)
	rr.addKubeletRatios(podsyncMS, kubeletMS, rawMS)
	if rr.floor != nil {
		rr.floor.addRatios(podsyncMS, floorOf(rawMS, rr.n), minimalMS)
	}
	rr.roundsDone++
	return nil
}

// podsyncRun runs rr.n pods through podsyncd (one RunPods) and records
// the time to running, podsyncd's CRI calls and CPU, and the runtime's
// CPU, per pod, in rr; then it cleans the runtime. It returns the time in
// ms, NaN when the run failed.
func podsyncRun(ctx context.Context, e *env, rr *runResult) (float64, error) {
	n := rr.n
	podsyncMS := math.NaN()
	pods := newPods("ps", n)
	e.noteUIDs(uidsOf(pods)...)
	req, err := runPodsRequest(pods)
	if err != nil {
		return podsyncMS, err
	}
	counts0, cerr0 := e.d.scrapeCounts(ctx)
	cpu0, err0 := localcri.ProcCPU(e.d.PID)
	thr0, terr0 := procThreadCPU(e.d.PID)
	rt0 := snapshotRuntime(e.inst.PID(), e.inst.Socket())
	start := time.Now()
	done, err := e.d.runPods(ctx, req)
	rt1 := snapshotRuntime(e.inst.PID(), e.inst.Socket())
	thr1, terr1 := procThreadCPU(e.d.PID)
	cpu1, err1 := localcri.ProcCPU(e.d.PID)
	counts1, cerr1 := e.d.scrapeCounts(ctx)
	if err == nil && cerr0 == nil && cerr1 == nil {
		for k, v := range counts1 {
			if rr.calls[k] == nil {
				rr.calls[k] = &sample{}
			}
			rr.calls[k].add((v - counts0[k]) / float64(n))
		}
	}
	if err != nil {
		rr.podsync.fail(err)
	} else {
		podsyncMS = msOf(done.Sub(start))
		rr.podsync.add(podsyncMS)
		ms, exact := threadCPUDeltaMS(thr0, thr1)
		switch err := firstErr(err0, err1); {
		case terr0 == nil && terr1 == nil && exact:
			rr.podsyncdCPU.add(ms / float64(n))
		case err == nil:
			rr.podsyncdCPU.add(ticksToMS(cpu1.Self-cpu0.Self) / float64(n))
			rr.cpuInTicks = true
		default:
			rr.podsyncdCPU.fail(err)
		}
		if c, s, err := runtimeDelta(rt0, rt1); err == nil {
			rr.ctrdPodsync.add(c / float64(n))
			rr.shimPodsync.add(s / float64(n))
		}
	}
	if err := e.cleanAll(ctx); err != nil {
		return podsyncMS, fmt.Errorf("clean after podsync run: %w", err)
	}
	return podsyncMS, nil
}

// rawRuns runs rr.n pods through raw CRI calls at each concurrency of
// rr.concs, from a clean runtime each time, and records the times (and at
// concurrency n the runtime's CPU per pod) in rr. It returns the times in
// ms of the runs that succeeded, by concurrency.
func rawRuns(ctx context.Context, e *env, rr *runResult) (map[int]float64, error) {
	n := rr.n
	rawMS := map[int]float64{}
	for _, c := range rr.concs {
		pods := newPods("raw", n)
		raws, err := e.rawPods(pods)
		if err != nil {
			return nil, err
		}
		rt0 := snapshotRuntime(e.inst.PID(), e.inst.Socket())
		start := time.Now()
		_, err = e.runRaw(ctx, raws, c)
		d := time.Since(start)
		rt1 := snapshotRuntime(e.inst.PID(), e.inst.Socket())
		if err != nil {
			rr.raw[c].fail(err)
		} else {
			rawMS[c] = msOf(d)
			rr.raw[c].add(rawMS[c])
			if c == n {
				if cd, s, err := runtimeDelta(rt0, rt1); err == nil {
					rr.ctrdRaw.add(cd / float64(n))
					rr.shimRaw.add(s / float64(n))
				}
			}
		}
		if err := e.cleanAll(ctx); err != nil {
			return nil, fmt.Errorf("clean after raw run: %w", err)
		}
	}
	return rawMS, nil
}

// crictlRun runs rr.n pods with the crictl loop, records the time in rr
// and cleans the runtime. It returns the time in ms, NaN when the run
// failed.
func crictlRun(ctx context.Context, e *env, rr *runResult) (float64, error) {
	crictlMS := math.NaN()
	pods := newPods("crictl", rr.n)
	raws, err := e.rawPods(pods)
	if err != nil {
		return crictlMS, err
	}
	files, err := e.crictlFiles(raws)
	if err != nil {
		return crictlMS, err
	}
	start := time.Now()
	err = e.runCrictl(ctx, raws, files)
	d := time.Since(start)
	if err != nil {
		rr.crictl.fail(err)
	} else {
		crictlMS = msOf(d)
		rr.crictl.add(crictlMS)
	}
	if err := e.cleanAll(ctx); err != nil {
		return crictlMS, fmt.Errorf("clean after crictl run: %w", err)
	}
	return crictlMS, nil
}

// addRatios records a round's times as ratios to the round's floor, its
// raw run at concurrency n; a round whose floor failed adds none. NaN
// times (failed runs) are left out.
func (rr *runResult) addRatios(podsyncMS, crictlMS float64, rawMS map[int]float64) {
	if floor, ok := rawMS[rr.n]; ok && floor > 0 {
		if !math.IsNaN(podsyncMS) {
			rr.podsyncRatio.add(podsyncMS / floor)
		}
		if !math.IsNaN(crictlMS) {
			rr.crictlRatio.add(crictlMS / floor)
		}
		for c, v := range rawMS {
			rr.rawRatio[c].add(v / floor)
		}
	}
}

// profileRunPods takes a CPU profile of podsyncd during one RunPods of n
// pods (not recorded): the profile's window is the measured median time
// with a margin; CPU profiles hold no samples while podsyncd idles.
func (b *bench) profileRunPods(ctx context.Context, e *env, n int, medianMS float64, path string) error {
	seconds := 5
	if !math.IsNaN(medianMS) {
		seconds = int(math.Ceil(medianMS*1.5/1000)) + 1
	}
	pods := newPods("prof", n)
	e.noteUIDs(uidsOf(pods)...)
	req, err := runPodsRequest(pods)
	if err != nil {
		return err
	}
	perr := make(chan error, 1)
	go func() { perr <- e.d.profile(ctx, "profile", seconds, path) }()
	// Let the profile start before the work does.
	time.Sleep(100 * time.Millisecond)
	_, rerr := e.d.runPods(ctx, req)
	err = <-perr
	if cerr := e.cleanAll(ctx); cerr != nil {
		b.log.Warn("clean after profile", zap.Error(cerr))
	}
	if rerr != nil {
		return rerr
	}
	return err
}

// flavourName names a flavour in the report.
func flavourName(f localcri.Flavour) string {
	if f == localcri.Containerd2 {
		return "2.x"
	}
	return string(f)
}
