package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
)

// The idle node: pod counts and targets (issue 24).
const (
	idlePods      = 100
	idlePodsLarge = 250
	idleBatch     = 50
	// targetIdleCPUVsKubelet and targetIdleRSSVsKubelet bound podsyncd's
	// idle CPU and RSS at idlePods as fractions of the kubelet's.
	targetIdleCPUVsKubelet = 0.25
	targetIdleRSSVsKubelet = 0.5
	// targetIdleLargeCore bounds podsyncd's idle CPU at idlePodsLarge, in
	// fractions of one core (0.5 %).
	targetIdleLargeCore = 0.005
)

// idleRow is one idle measurement: CPU-seconds per minute of the agent,
// of containerd (with its waited-for children) and of the shims (with
// runc), and the agent's VmRSS at the end of the window and VmHWM.
type idleRow struct {
	label      string
	agent      string // "podsyncd", "kubelet", "" (none running)
	pods       int
	agentCPU   float64
	ctrdCPU    float64
	shimCPU    float64
	rss, hwm   int64
	inexact    bool // a thread of the agent ended in the window
	err        string
	measuredOK bool
	profile    string // podsyncd's CPU profile of a window after it, if taken
}

// idleResult is the idle-node rows of one flavour.
type idleResult struct {
	window, settle time.Duration
	podsyncd       *idleRow // idlePods pods through RunPods
	baseline       *idleRow // the same pods, podsyncd stopped
	kubelet        *idleRow // idlePods static pods
	large          *idleRow // idlePodsLarge pods through RunPods
	errs           []string
	// skipped says what the run's -deadline left out: listed with the
	// failures, but not one (a skipped row fails no run).
	skipped []string
}

func (r *idleResult) rows() []*idleRow {
	var out []*idleRow
	for _, row := range []*idleRow{r.podsyncd, r.baseline, r.kubelet, r.large} {
		if row != nil {
			out = append(out, row)
		}
	}
	return out
}

// idleNode measures the idle node: podsyncd with idlePods pods; the same
// pods with podsyncd stopped (containerd's own cost of them); the
// kubelet with idlePods static pods; podsyncd with idlePodsLarge pods.
// Each runs, settles, and is measured over -idle-window with nothing
// changing.
func (b *bench) idleNode(ctx context.Context, e *env) *idleResult {
	res := &idleResult{window: b.cfg.idleWindow, settle: idleSettle(b.cfg.quick)}
	log := b.log.With(zap.String("flavour", string(e.flavour)))
	fail := func(what string, err error) {
		res.errs = append(res.errs, what+": "+err.Error())
		log.Error("idle node", zap.String("row", what), zap.Error(err))
	}
	if err := b.idlePodsync(ctx, e, res); err != nil {
		fail("podsyncd", err)
	}
	if ctx.Err() == nil {
		if err := b.idleKubelet(ctx, e, res); err != nil {
			fail("kubelet", err)
		}
	}
	if ctx.Err() == nil {
		if b.pastDeadline() {
			res.skipped = append(res.skipped, fmt.Sprintf("podsyncd with %d pods skipped: the run passed its -deadline", idlePodsLarge))
		} else if err := b.idleLarge(ctx, e, res); err != nil {
			fail(fmt.Sprintf("podsyncd, %d pods", idlePodsLarge), err)
		}
	}
	for _, row := range res.rows() {
		log.Info("idle", zap.String("row", row.label), zap.Float64("agent_cpu_s_per_min", row.agentCPU),
			zap.Float64("containerd_cpu_s_per_min", row.ctrdCPU), zap.Float64("shims_cpu_s_per_min", row.shimCPU),
			zap.Int64("rss", row.rss))
	}
	return res
}

func idleSettle(quick bool) time.Duration {
	if quick {
		return 5 * time.Second
	}
	return 15 * time.Second
}

// runPodsBatches runs pods through podsyncd, idleBatch per RunPods.
func (e *env) runPodsBatches(ctx context.Context, pods []*corev1.Pod) error {
	e.noteUIDs(uidsOf(pods)...)
	for i := 0; i < len(pods); i += idleBatch {
		req, err := runPodsRequest(pods[i:min(i+idleBatch, len(pods))])
		if err != nil {
			return err
		}
		if _, err := e.d.runPods(ctx, req); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) idlePodsync(ctx context.Context, e *env, res *idleResult) error {
	if err := e.ensurePodsyncd(ctx); err != nil {
		return err
	}
	pods := newPods("idle", idlePods)
	if err := e.runPodsBatches(ctx, pods); err != nil {
		return errors.Join(err, e.cleanAll(ctx))
	}
	res.podsyncd = b.measureIdle(ctx, e, "podsyncd", "podsyncd", e.d.PID, pods, res)
	// The same pods with no agent: containerd's own cost of them.
	e.stopPodsyncd()
	res.baseline = b.measureIdle(ctx, e, "no agent (podsyncd stopped, its pods running)", "", 0, pods, res)
	if err := e.restartPodsyncd(ctx); err != nil {
		return err
	}
	return e.drain(ctx)
}

func (b *bench) idleKubelet(ctx context.Context, e *env, res *idleResult) error {
	k, err := b.startKubelet(ctx, e)
	if err != nil {
		res.kubelet = &idleRow{label: "kubelet", agent: "kubelet", pods: idlePods, err: err.Error()}
		return errors.Join(err, e.restartPodsyncd(ctx), e.cleanAll(ctx))
	}
	pods := newPods("idlek", idlePods)
	if _, err := e.kubeletPods(ctx, k, pods, 5*time.Minute); err != nil {
		res.kubelet = &idleRow{label: "kubelet", agent: "kubelet", pods: idlePods, err: err.Error()}
		return errors.Join(err, b.endKubelet(ctx, e, k))
	}
	res.kubelet = b.measureIdle(ctx, e, "kubelet", "kubelet", k.PID, pods, res)
	return b.endKubelet(ctx, e, k)
}

func (b *bench) idleLarge(ctx context.Context, e *env, res *idleResult) error {
	if err := e.ensurePodsyncd(ctx); err != nil {
		return err
	}
	pods := newPods("idlel", idlePodsLarge)
	if err := e.runPodsBatches(ctx, pods); err != nil {
		return errors.Join(err, e.cleanAll(ctx))
	}
	res.large = b.measureIdle(ctx, e, fmt.Sprintf("podsyncd, %d pods", idlePodsLarge), "podsyncd", e.d.PID, pods, res)
	return e.drain(ctx)
}

// drain deletes every podsync pod and waits until the runtime is empty,
// with room for hundreds of pods on a loaded machine (cleanAll's bound
// is for the tens of a round), then runs cleanAll.
func (e *env) drain(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	if err := e.d.deleteAll(dctx); err != nil {
		return err
	}
	if err := e.waitEmpty(dctx); err != nil {
		return err
	}
	return e.cleanAll(ctx)
}

// measureIdle waits res.settle, then measures the agent pid (none when
// 0), containerd and the shims over res.window.
func (b *bench) measureIdle(ctx context.Context, e *env, label, agent string, pid int, pods []*corev1.Pod, res *idleResult) *idleRow {
	row := &idleRow{label: label, agent: agent, pods: len(pods)}
	b.log.Info("idle: measuring", zap.String("row", label), zap.Duration("settle", res.settle), zap.Duration("window", res.window))
	if !sleepCtx(ctx, res.settle) {
		row.err = ctx.Err().Error()
		return row
	}
	var a0, a1 agentCPU
	if pid != 0 {
		a0 = snapshotAgent(pid)
	}
	rt0 := snapshotRuntime(e.inst.PID(), e.inst.Socket())
	start := time.Now()
	if !sleepCtx(ctx, res.window) {
		row.err = ctx.Err().Error()
		return row
	}
	rt1 := snapshotRuntime(e.inst.PID(), e.inst.Socket())
	if pid != 0 {
		a1 = snapshotAgent(pid)
	}
	perMin := time.Minute.Seconds() / time.Since(start).Seconds()
	c, s, err := runtimeDelta(rt0, rt1)
	if err != nil {
		row.err = err.Error()
		return row
	}
	row.ctrdCPU, row.shimCPU = c/1000*perMin, s/1000*perMin
	if pid != 0 {
		ms, exact, err := agentDeltaMS(a0, a1)
		if err != nil {
			row.err = err.Error()
			return row
		}
		row.agentCPU, row.inexact = ms/1000*perMin, !exact
		if row.rss, row.hwm, err = procMemory(pid); err != nil {
			row.err = err.Error()
			return row
		}
	}
	if agent == "podsyncd" && b.cfg.profileDir != "" {
		// A window of its own: the profiler's cost stays out of the
		// measured one.
		path := filepath.Join(b.cfg.profileDir, fmt.Sprintf("idle-%dpods-containerd%s.pprof", len(pods), string(e.flavour)))
		if err := e.d.profile(ctx, "profile", int(res.window.Seconds()), path); err != nil {
			b.log.Warn("idle profile", zap.Error(err))
		} else {
			row.profile = path
		}
	}
	// Nothing changed: every pod still runs its container.
	if err := e.waitAllRunning(ctx, uidsOf(pods), time.Second); err != nil {
		row.err = "pods not running at the end of the window: " + err.Error()
		return row
	}
	row.measuredOK = true
	return row
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func renderIdle(w *strings.Builder, fr *flavourResult) {
	r := fr.idle
	if r == nil {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## Idle node — containerd %s (%s)\n\n", flavourName(fr.flavour), fr.version)
	p("Running pods, %s to settle, then %s with nothing changing. CPU in CPU-seconds per minute\n"+
		"(1 CPU-s/min = 1.67 %% of one core).\n\n", r.settle, r.window)
	p("| agent | pods | agent CPU | containerd | shims | total | agent VmRSS (VmHWM) |\n|---|---|---|---|---|---|---|\n")
	for _, row := range r.rows() {
		if !row.measuredOK {
			p("| %s | %d | FAILED | | | | |\n", row.label, row.pods)
			continue
		}
		agent, mem := "—", "—"
		if row.agent != "" {
			agent = fmt.Sprintf("%.3f (%.2f %%)", row.agentCPU, row.agentCPU/60*100)
			if row.inexact {
				agent += " (a thread ended: a lower bound)"
			}
			mem = fmt.Sprintf("%s (%s)", mib(row.rss), mib(row.hwm))
		}
		p("| %s | %d | %s | %.3f | %.3f | %.3f | %s |\n", row.label, row.pods, agent, row.ctrdCPU, row.shimCPU,
			row.agentCPU+row.ctrdCPU+row.shimCPU, mem)
	}
	p("\n")
	for _, row := range r.rows() {
		if row.profile != "" {
			p("CPU profile of podsyncd over a window of the same length after the measured one (%s): `%s`.\n\n", row.label, row.profile)
		}
	}
}
