package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
)

// DefaultProbeInterval is how often a HealthChecker probes the runtime by
// default.
const DefaultProbeInterval = 2 * time.Second

// Probe checks that the container runtime answers; podsyncd passes CRI
// Version. It returns an error while the runtime does not answer.
type Probe func(ctx context.Context) error

// HealthChecker polls a runtime Probe and publishes the result as
// grpc.health.v1 statuses for "" (the server) and
// "podsync.v1.PodSyncService": NOT_SERVING until the probe first answers,
// SERVING while it answers, NOT_SERVING while it fails. Ready tells
// handlers, without gRPC, whether the runtime ever answered.
type HealthChecker struct {
	probe    Probe
	interval time.Duration
	log      *zap.Logger
	srv      *health.Server

	ready   atomic.Bool // the probe answered at least once
	serving atomic.Bool // the last probe answered

	mu   sync.Mutex
	down bool // a failure is logged; each outage is logged once

	now chan struct{} // ProbeNow's requests, capacity 1
}

// NewHealthChecker returns a HealthChecker of probe (required). interval
// is the time between probes; zero means DefaultProbeInterval. Each probe
// gets the interval as its timeout. Nothing is probed until Run.
func NewHealthChecker(probe Probe, interval time.Duration, log *zap.Logger) *HealthChecker {
	if interval <= 0 {
		interval = DefaultProbeInterval
	}
	if log == nil {
		log = zap.NewNop()
	}
	hc := &HealthChecker{probe: probe, interval: interval, log: log, srv: health.NewServer(), now: make(chan struct{}, 1)}
	hc.set(healthpb.HealthCheckResponse_NOT_SERVING)
	return hc
}

// Run probes at once, then every interval and whenever ProbeNow asks,
// until ctx ends; it returns ctx's error.
func (hc *HealthChecker) Run(ctx context.Context) error {
	t := time.NewTicker(hc.interval)
	defer t.Stop()
	for {
		hc.check(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-hc.now:
		}
	}
}

// ProbeNow asks Run to probe at once rather than at its next tick, for a
// runtime that just connected: podsyncd reports SERVING without waiting
// out the interval.
func (hc *HealthChecker) ProbeNow() {
	select {
	case hc.now <- struct{}{}:
	default:
	}
}

// Ready reports whether the runtime has answered since podsyncd started.
// Handlers that need the runtime return CheckReady's error until then.
func (hc *HealthChecker) Ready() bool { return hc.ready.Load() }

// Serving reports whether the last probe answered.
func (hc *HealthChecker) Serving() bool { return hc.serving.Load() }

// CheckReady returns nil once the runtime has answered, and before that
// an UNAVAILABLE status with reason RUNTIME_UNAVAILABLE.
func (hc *HealthChecker) CheckReady() error {
	if hc.Ready() {
		return nil
	}
	return NewError(codes.Unavailable, errorinfo.ReasonRuntimeUnavailable,
		"the container runtime has not answered yet; retry", nil)
}

func (hc *HealthChecker) check(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, hc.interval)
	err := hc.probe(pctx)
	cancel()
	if ctx.Err() != nil {
		// The probe failed because podsyncd is stopping, not the runtime.
		return
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if err != nil {
		hc.serving.Store(false)
		if !hc.down {
			hc.log.Warn("runtime unavailable", zap.Error(err))
			hc.down = true
		}
		hc.set(healthpb.HealthCheckResponse_NOT_SERVING)
		return
	}
	hc.ready.Store(true)
	if !hc.serving.Swap(true) {
		hc.log.Info("runtime available")
	}
	hc.down = false
	hc.set(healthpb.HealthCheckResponse_SERVING)
}

func (hc *HealthChecker) set(st healthpb.HealthCheckResponse_ServingStatus) {
	hc.srv.SetServingStatus("", st)
	hc.srv.SetServingStatus(podsyncv1.PodSyncService_ServiceDesc.ServiceName, st)
}

// server is the grpc.health.v1 service the checker publishes to.
func (hc *HealthChecker) server() *health.Server { return hc.srv }
