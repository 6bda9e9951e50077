package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/internal/testing/localcri"
)

// stagePods writes the static pod manifests of pods into the staging
// directory (same filesystem as staticPodPath) and returns their names.
func (k *kubelet) stagePods(pods []*corev1.Pod) ([]string, error) {
	names := make([]string, len(pods))
	for i, p := range pods {
		data, err := staticPodManifest(p, k.token)
		if err != nil {
			return nil, err
		}
		names[i] = p.Name + ".yaml"
		if err := os.WriteFile(filepath.Join(k.s.stageDir(), names[i]), data, 0o644); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// publish moves staged manifests into staticPodPath, back to back.
func (k *kubelet) publish(names []string) error {
	for _, n := range names {
		if err := os.Rename(filepath.Join(k.s.stageDir(), n), filepath.Join(k.s.staticDir(), n)); err != nil {
			return err
		}
	}
	return nil
}

// agentCPU is an agent's CPU: its threads' on-CPU time (ns) and its
// waited-for children's (ticks).
type agentCPU struct {
	threads  threadCPU
	children float64
	err      error
}

func snapshotAgent(pid int) agentCPU {
	thr, err := procThreadCPU(pid)
	c, err2 := localcri.ProcCPU(pid)
	return agentCPU{threads: thr, children: c.Children, err: firstErr(err, err2)}
}

// agentDeltaMS is the agent's CPU between two snapshots in ms; exact is
// false when a thread ended in between (its time is lost).
func agentDeltaMS(before, after agentCPU) (ms float64, exact bool, err error) {
	if err := firstErr(before.err, after.err); err != nil {
		return 0, false, err
	}
	ms, exact = threadCPUDeltaMS(before.threads, after.threads)
	return ms + ticksToMS(after.children-before.children), exact, nil
}

// runningByUID lists the running containers by pod UID (CRI label).
func (e *env) runningByUID(ctx context.Context) (map[string][]string, error) {
	ctrs, err := e.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, fmt.Errorf("list running containers: %w", err)
	}
	out := map[string][]string{}
	for _, c := range ctrs {
		u := c.GetLabels()[model.LabelPodUID]
		out[u] = append(out[u], c.GetId())
	}
	return out, nil
}

// waitAllRunning waits, up to timeout, until every pod of uids has a
// running container, polling CRI as waitRunning does.
func (e *env) waitAllRunning(ctx context.Context, uids []types.UID, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		running, err := e.runningByUID(ctx)
		if err != nil {
			return err
		}
		n := 0
		for _, u := range uids {
			if len(running[string(u)]) > 0 {
				n++
			}
		}
		if n == len(uids) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d containers running: %w", n, len(uids), ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// kubeletPods starts pods as static pods of k (one rename each, back to
// back) and waits until they all run. It returns when the first rename
// began.
func (e *env) kubeletPods(ctx context.Context, k *kubelet, pods []*corev1.Pod, timeout time.Duration) (time.Time, error) {
	names, err := k.stagePods(pods)
	if err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	if err := k.publish(names); err != nil {
		return start, err
	}
	return start, e.waitAllRunning(ctx, uidsOf(pods), timeout)
}

// kubeletRun starts a kubelet, runs rr.n static pods on it and records
// the time from the first rename into staticPodPath until every
// container is RUNNING (CRI poll), the kubelet's CPU and the runtime's
// per pod, and podsync ÷ kubelet for the round; then it stops the
// kubelet and cleans the runtime (untimed). A kubelet that does not start
// fails the row; an error is returned only when the runtime cannot be
// cleaned.
func (b *bench) kubeletRun(ctx context.Context, e *env, rr *runResult) (float64, error) {
	kubeletMS := math.NaN()
	k, err := b.startKubelet(ctx, e)
	if err != nil {
		rr.kubelet.fail(err)
		if rerr := e.restartPodsyncd(ctx); rerr != nil {
			return kubeletMS, rerr
		}
		return kubeletMS, e.cleanAll(ctx)
	}
	pods := newPods("kl", rr.n)
	a0 := snapshotAgent(k.PID)
	rt0 := snapshotRuntime(e.inst.PID(), e.inst.Socket())
	start, err := e.kubeletPods(ctx, k, pods, runTimeout(rr.n))
	d := time.Since(start)
	rt1 := snapshotRuntime(e.inst.PID(), e.inst.Socket())
	a1 := snapshotAgent(k.PID)
	if err != nil {
		rr.kubelet.fail(fmt.Errorf("kubelet: %w", err))
	} else {
		kubeletMS = msOf(d)
		rr.kubelet.add(kubeletMS)
		if cpu, _, err := agentDeltaMS(a0, a1); err == nil {
			rr.kubeletCPU.add(cpu / float64(rr.n))
		} else {
			rr.kubeletCPU.fail(err)
		}
		if c, s, err := runtimeDelta(rt0, rt1); err == nil {
			rr.ctrdKubelet.add(c / float64(rr.n))
			rr.shimKubelet.add(s / float64(rr.n))
		}
	}
	if err := b.endKubelet(ctx, e, k); err != nil {
		return kubeletMS, fmt.Errorf("clean after kubelet run: %w", err)
	}
	return kubeletMS, nil
}

// addKubeletRatios records a round's podsync ÷ kubelet and kubelet ÷
// the raw floor; NaN times (failed runs) add nothing.
func (rr *runResult) addKubeletRatios(podsyncMS, kubeletMS float64, rawMS map[int]float64) {
	if math.IsNaN(kubeletMS) || kubeletMS <= 0 {
		return
	}
	if !math.IsNaN(podsyncMS) {
		rr.kubeletRatio.add(podsyncMS / kubeletMS)
	}
	if floor, ok := rawMS[rr.n]; ok && floor > 0 {
		rr.kubeletFloor.add(kubeletMS / floor)
	}
}
