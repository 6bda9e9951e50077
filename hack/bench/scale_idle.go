package main

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// idleCPU is a process group's CPU with nothing asked of it, in ms per
// second per node served: with no pods yet (empty) and once every pod
// runs (loaded). ok is false when it was not measured (-scale-idle 0).
type idleCPU struct {
	empty, loaded float64
	ok            bool
}

// idleWindow measures the CPU of the agent's processes (and the hollow
// nodes', if any) over w.idle with nothing asked of them, in ms per
// second per node. With profile, the agent is profiled over the window
// (-profile).
func (w workload) idleWindow(ctx context.Context, log *zap.Logger, profile bool) (agent, hollow float64, err error) {
	per := func(b, a procUsage, d time.Duration) float64 {
		return (a.cpuMS - b.cpuMS) / d.Seconds() / float64(len(w.nodes))
	}
	groups := []func() []int{w.agent}
	if w.hollow != nil {
		groups = append(groups, w.hollow)
	}
	before := make([]procUsage, len(groups))
	for i, g := range groups {
		if before[i], err = usageOf(g()); err != nil {
			return 0, 0, fmt.Errorf("idle usage: %w", err)
		}
	}
	var profiled chan error
	if profile && w.profile != nil {
		profiled = make(chan error, 1)
		go func() {
			path, err := w.profile(ctx, "idle", w.idle)
			if err == nil {
				log.Info("podsync-vk profiled idle", zap.String("profile", path))
			}
			profiled <- err
		}()
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-time.After(w.idle):
	}
	took := time.Since(start)
	if profiled != nil {
		if err := <-profiled; err != nil {
			return 0, 0, err
		}
	}
	got := make([]float64, len(groups))
	for i, g := range groups {
		after, err := usageOf(g())
		if err != nil {
			return 0, 0, fmt.Errorf("idle usage: %w", err)
		}
		got[i] = per(before[i], after, took)
	}
	if len(got) > 1 {
		hollow = got[1]
	}
	return got[0], hollow, nil
}
