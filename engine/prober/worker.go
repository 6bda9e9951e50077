package prober

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
)

// Probe defaults, as the API server's defaulting sets them; used when a
// field is zero.
const (
	defaultPeriodSeconds    = 10
	defaultTimeoutSeconds   = 1
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
)

// worker probes one container instance with one probe, periodically, until
// it is cancelled or its result becomes final: a startup probe that passed
// or failed, a liveness probe that failed. It is the kubelet's
// containerBoundWorker.
type worker struct {
	m    *Manager
	inst *instance
	typ  Type
	spec *corev1.Probe
	log  *zap.Logger

	ctx    context.Context
	cancel context.CancelFunc

	// Owned by the worker's goroutine.
	lastResult Result
	resultRun  int
	lastErr    string
}

func newWorker(m *Manager, inst *instance, t Type, spec *corev1.Probe) *worker {
	ctx, cancel := context.WithCancel(m.ctx)
	return &worker{
		m:    m,
		inst: inst,
		typ:  t,
		spec: spec,
		log: m.log.With(
			zap.String(logPodNamespace, inst.podNamespace),
			zap.String(logPodName, inst.podName),
			zap.String(logPodUID, string(inst.podUID)),
			zap.String(logContainerName, inst.container.Name),
			zap.String(logContainerID, inst.id),
			zap.Stringer(logProbeType, t),
		),
		ctx:    ctx,
		cancel: cancel,
	}
}

// run probes at the first probe time and then every period, skipping
// periods a slow probe overran, as a time.Ticker. It is the worker's
// goroutine.
func (w *worker) run() {
	defer w.m.wg.Done()
	defer w.m.live.Add(-1)
	defer w.cancel()

	period := seconds(w.spec.PeriodSeconds, defaultPeriodSeconds)
	next := w.m.clock.Now().Add(w.firstProbeDelay(period))
	for {
		if !w.sleepUntil(next) {
			return
		}
		if !w.probeOnce() {
			return
		}
		now := w.m.clock.Now()
		next = next.Add(period)
		for !next.After(now) {
			next = next.Add(period)
		}
	}
}

// firstProbeDelay is the time until the first probe: none before the
// container has run for initialDelaySeconds, plus, for an instance adopted
// from an earlier podsync, a random part of a period so that a restart
// does not probe every container at once (the kubelet jitters adopted
// containers' first probe the same way).
func (w *worker) firstProbeDelay(period time.Duration) time.Duration {
	initial := time.Duration(max(w.spec.InitialDelaySeconds, 0)) * time.Second
	delay := max(w.inst.startedAt.Add(initial).Sub(w.m.clock.Now()), 0)
	if w.inst.adopted {
		delay += rand.N(period)
	}
	return delay
}

// sleepUntil waits until t on the Manager's clock, reporting false if the
// worker was cancelled first.
func (w *worker) sleepUntil(t time.Time) bool {
	d := t.Sub(w.m.clock.Now())
	if d <= 0 {
		return w.ctx.Err() == nil
	}
	timer := w.m.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-w.ctx.Done():
		return false
	case <-timer.C():
		return true
	}
}

// probeOnce runs the probe once and records its result once it has held
// for its threshold. It reports whether the worker goes on: a startup
// probe ends when it reaches either threshold, a liveness probe when it
// fails (the container will be restarted, and its next instance gets a new
// worker), as in the kubelet.
func (w *worker) probeOnce() (keepGoing bool) {
	defer func() {
		// As the kubelet's worker: a panic in a probe is logged, and
		// probing goes on.
		if p := recover(); p != nil {
			w.log.Error("probe panicked", zap.String(logPanic, fmt.Sprint(p)))
			keepGoing = w.ctx.Err() == nil
		}
	}()

	o, output, err := w.m.prober.probe(w.ctx, w.spec, w.target())
	if w.ctx.Err() != nil {
		// Cancelled: the instance is gone or the Manager is stopping.
		return false
	}
	if err != nil {
		// A probe error is not a result: it is thrown away, as in the
		// kubelet. Log it once per run of the same error.
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.log.Warn("probe error", zap.Error(err))
		} else {
			w.log.Debug("probe error", zap.Error(err))
		}
		w.m.event(w, EventUnhealthy, fmt.Sprintf("%s probe errored and resulted in unknown state: %s", w.typ, err))
		return true
	}
	w.lastErr = ""

	result := Failure
	switch o {
	case outcomeSuccess:
		result = Success
	case outcomeWarning:
		// A redirect to another host counts as success, with a warning
		// (the kubelet's ProbeWarning event).
		result = Success
		w.log.Warn("probe warning", zap.String(logOutput, output))
		w.m.event(w, EventProbeWarning, fmt.Sprintf("%s probe warning: %s", w.typ, output))
	default:
		w.log.Debug("probe failed", zap.String(logOutput, output))
	}

	if result == w.lastResult {
		w.resultRun++
	} else {
		w.lastResult = result
		w.resultRun = 1
	}
	// Every failure is an event, as the kubelet's prober records it,
	// below the threshold too; the one that changes the result is
	// reported with its update instead.
	failed := func() {
		if result == Failure {
			w.m.event(w, EventUnhealthy, fmt.Sprintf("%s probe failed: %s", w.typ, output))
		}
	}
	if (result == Failure && w.resultRun < threshold(w.spec.FailureThreshold, defaultFailureThreshold)) ||
		(result == Success && w.resultRun < threshold(w.spec.SuccessThreshold, defaultSuccessThreshold)) {
		failed()
		return true
	}

	if !w.m.record(w, result, output) {
		failed()
	}

	switch {
	case w.typ == Startup:
		return false
	case w.typ == Liveness && result == Failure:
		return false
	default:
		return true
	}
}

// target returns what the probe runs against now.
func (w *worker) target() target {
	return target{
		container:   w.inst.container,
		containerID: w.inst.id,
		host:        w.m.host(w.inst),
	}
}

// seconds returns s seconds, or def seconds when s is not positive.
func seconds(s, def int32) time.Duration {
	if s <= 0 {
		s = def
	}
	return time.Duration(s) * time.Second
}

// threshold returns n, or def when n is not positive.
func threshold(n, def int32) int {
	if n <= 0 {
		n = def
	}
	return int(n)
}
