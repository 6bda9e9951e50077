//go:build integration

package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// crashCase is one way for podsyncd to die in the middle of a batch.
type crashCase struct {
	name string
	// arms are the PODSYNC_FAILPOINTS of the podsyncd runs that must die,
	// one after the other, each given the same request; then an unarmed
	// podsyncd gets it once more and must converge. N in exit@N is chosen
	// so that the point fires in the middle of the batch.
	arms []string
	// prepare runs before the first armed podsyncd starts, and cleanup
	// (which may run twice) after the last one died.
	prepare, cleanup func()
	// between runs after the first death.
	between func(ctx context.Context, t *testing.T)
	// deleting cases delete the previous case's batch instead of running
	// one.
	deleting bool
}

// crashCases cover every failpoint; see engine/failpoint for what each
// point leaves behind.
var crashCases = []crashCase{
	{name: "runpods-admitted", arms: []string{failpoint.RunPodsAdmitted + "=exit@1"}},
	// Deleting cases delete the previous case's batch.
	{name: "after-container-stopped", deleting: true, arms: []string{failpoint.AfterContainerStopped + "=exit@6"}},
	{name: "before-store-put", arms: []string{failpoint.BeforeStorePut + "=exit@10"}},
	// Death inside a store commit (the robustness test delays it): the
	// transaction is lost whole.
	{name: "store-commit", arms: []string{failpoint.StoreCommit + "=exit@12"}},
	{name: "mid-sandbox-removal", deleting: true, arms: []string{failpoint.MidSandboxRemoval + "=exit@6"}},
	{name: "after-store-put", arms: []string{failpoint.AfterStorePut + "=exit@10"}},
	{name: "before-store-delete", deleting: true, arms: []string{failpoint.BeforeStoreDelete + "=exit@6"}},
	{name: "before-image-pull", arms: []string{failpoint.BeforeImagePull + "=exit@2"}},
	{
		// The pull is a CRI call: podsyncd dies while containerd pulls
		// from a registry slowed down to 5 s per request.
		name:    "image-pull-in-flight",
		arms:    []string{failpoint.BeforeImagePull + "=exit(500ms)@1"},
		prepare: func() { inst.Registry().SetDelay(5 * time.Second) },
		cleanup: func() { inst.Registry().Reset() },
	},
	{name: "after-sandbox-created", arms: []string{failpoint.AfterSandboxCreated + "=exit@8"}},
	{name: "after-container-created", arms: []string{failpoint.AfterContainerCreated + "=exit@10"}},
	{
		// podsyncd dies while StartContainer is in flight.
		name: "container-start-in-flight",
		arms: []string{failpoint.AfterContainerCreated + "=exit(20ms)@6"},
	},
	{name: "after-container-started", arms: []string{failpoint.AfterContainerStarted + "=exit@12"}},
	{name: "before-status-append", arms: []string{failpoint.BeforeStatusAppend + "=exit@10"}},
	{
		// The first death leaves a created container, which the second
		// run's first pass replaces and its garbage collection removes.
		name: "gc-remove-container",
		arms: []string{failpoint.AfterContainerCreated + "=exit@6", failpoint.GCRemoveContainer + "=exit@1"},
	},
	{
		// The first death leaves a sandbox without containers; stopped
		// meanwhile (its pause process died), it is replaced by the
		// second run, whose garbage collection removes it.
		name:    "gc-remove-sandbox",
		arms:    []string{failpoint.AfterSandboxCreated + "=exit@5", failpoint.GCRemoveSandbox + "=exit@1"},
		between: stopEmptySandboxes,
	},
}

// TestCrashAtFailpoints kills podsyncd at each failpoint in the middle of
// a 20-pod RunPods (or of the deletion of 19 pods), restarts it and issues
// the same request again: the batch converges as checkConverged says, or
// the deleted pods are gone without a trace. A veteran pod, whose
// container restarted once before, is part of every batch and must keep
// its container and restart count through every crash. The cases share a
// root directory and run in order; the first failure ends the test.
func TestCrashAtFailpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	n := newNode(t)
	n.startServing()
	vet := n.startVeteran(ctx)
	parent := n.t
	defer func() { n.t = parent }()
	// live are the pods of the last batch but the veteran, still held.
	var live []*testPod
	covered := map[string]bool{}
	ran := 0
	for _, tc := range crashCases {
		ok := t.Run(tc.name, func(t *testing.T) {
			n.t = t
			ran++
			start := time.Now()
			phase := func(what string) { t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), what) }
			var batch []*testPod
			if tc.deleting {
				if len(live) == 0 {
					live = newBatch(t, tc.name, nil)
					n.runAll(ctx, append(live, vet.pod))
					phase("batch to delete runs")
				}
				batch = live
			} else {
				if len(live) > 0 {
					n.removeBatch(ctx, live)
					live = nil
					phase("previous batch removed")
				}
				batch = newBatch(t, tc.name, vet.pod)
			}
			trigger := func(ctx context.Context) error {
				if tc.deleting {
					return n.deletePods(ctx, batch)
				}
				_, err := n.runPods(ctx, batch, nil)
				return err
			}
			n.cur.Stop()
			if tc.prepare != nil {
				tc.prepare()
			}
			if tc.cleanup != nil {
				t.Cleanup(tc.cleanup) // also if the case fails
			}
			for i, arm := range tc.arms {
				n.crashAt(ctx, arm, trigger)
				covered[strings.SplitN(arm, "=", 2)[0]] = true
				phase("died at " + arm)
				if i == 0 && tc.between != nil {
					tc.between(ctx, t)
				}
			}
			if tc.cleanup != nil {
				tc.cleanup()
			}
			n.startServing()
			phase("restarted")
			if tc.deleting {
				n.removeBatch(ctx, batch)
				live = nil
				n.checkConverged(ctx, []*testPod{vet.pod}, vet, 0)
				return
			}
			n.runAll(ctx, batch)
			phase("batch runs")
			n.checkConverged(ctx, batch, vet, int32(max(len(tc.arms), 1)))
			phase("checked")
			live = batch[:len(batch)-1]
		})
		if !ok {
			return
		}
	}
	if ran < len(crashCases) {
		return // -run picked some cases
	}
	for _, p := range failpoint.Points() {
		// Not a place to die: a switch of the store's checks, for the
		// robustness test's scratch build.
		if p == failpoint.SkipPreconditions {
			continue
		}
		if !covered[p] {
			t.Errorf("failpoint %s has no crash case", p)
		}
	}
}

// crashAt starts podsyncd armed with arm, issues trigger and waits for
// podsyncd to die of the failpoint.
func (n *node) crashAt(ctx context.Context, arm string, trigger func(context.Context) error) {
	n.t.Helper()
	name := strings.SplitN(arm, "=", 2)[0]
	d := n.start(arm)
	done := n.triggerWhileUp(ctx, d, trigger)
	if !d.AwaitExit(2 * time.Minute) {
		d.Kill()
		n.t.Fatalf("%s still ran 2 minutes later: failpoint %s never fired (request: %v)", d.Name(), name, <-done)
	}
	err := <-done
	if !d.KilledBy(syscall.SIGKILL) || !d.fired(name) {
		n.t.Fatalf("%s ended with %v, want killed by failpoint %s", d.Name(), d.State(), name)
	}
	n.t.Logf("%s died at its failpoint (request: %v)", d.Name(), err)
}

// triggerWhileUp runs trigger once d serves (if it ever does), until d
// exits; the channel delivers trigger's error.
func (n *node) triggerWhileUp(ctx context.Context, d *podsyncd, trigger func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	if !d.awaitServing(time.Minute) {
		done <- fmt.Errorf("%s exited before serving", d.Name())
		return done
	}
	tctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		select {
		case <-d.Done():
		case <-tctx.Done():
		}
	}()
	go func() { done <- trigger(tctx) }()
	return done
}

// stopEmptySandboxes stops every ready sandbox without containers, as if
// its pause process had died while podsyncd was down.
func stopEmptySandboxes(ctx context.Context, t *testing.T) {
	t.Helper()
	rt, err := readRuntime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stopped := 0
	for _, sb := range rt.sandboxes {
		if sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		empty := true
		for _, c := range rt.containers {
			if c.GetPodSandboxId() == sb.GetId() {
				empty = false
			}
		}
		if empty {
			localcritest.Crictl(t, inst, "stopp", sb.GetId())
			stopped++
		}
	}
	if stopped == 0 {
		t.Fatal("no empty sandbox after the crash")
	}
	t.Logf("stopped %d empty sandboxes", stopped)
}

// TestRandomKills kills podsyncd with SIGKILL at random moments of a
// 20-pod RunPods, several times in a row, restarts it and issues the same
// request again; then kills it at a random moment of the batch's deletion.
// The seed is logged; PODSYNC_FAULTS_SEED replays it. PODSYNC_SOAK=1 runs
// many more rounds.
func TestRandomKills(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("PODSYNC_FAULTS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("PODSYNC_FAULTS_SEED: %v", err)
		}
	}
	t.Logf("seed %d (PODSYNC_FAULTS_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	rounds, kills := 1, 3
	timeout := 10 * time.Minute
	if os.Getenv("PODSYNC_SOAK") != "" {
		rounds, kills, timeout = 20, 5, 80*time.Minute
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	n := newNode(t)
	n.startServing()
	vet := n.startVeteran(ctx)
	for round := range rounds {
		batch := newBatch(t, fmt.Sprintf("random-%d", round), vet.pod)
		run := func(ctx context.Context) error { _, err := n.runPods(ctx, batch, nil); return err }
		for k := range kills {
			if n.cur.Exited() {
				n.startServing()
			}
			n.killAtRandom(ctx, rng, fmt.Sprintf("round %d, kill %d of RunPods", round, k+1), 3*time.Second, run)
		}
		n.startServing()
		n.runAll(ctx, batch)
		n.checkConverged(ctx, batch, vet, int32(kills))

		pods := batch[:len(batch)-1]
		del := func(ctx context.Context) error { return n.deletePods(ctx, pods) }
		n.killAtRandom(ctx, rng, fmt.Sprintf("round %d, kill of the deletion", round), 1500*time.Millisecond, del)
		n.startServing()
		n.removeBatch(ctx, pods)
		n.checkConverged(ctx, []*testPod{vet.pod}, vet, 0)
	}
}

// killAtRandom issues trigger on the running podsyncd and kills it with
// SIGKILL after a random delay below upTo.
func (n *node) killAtRandom(ctx context.Context, rng *rand.Rand, what string, upTo time.Duration, trigger func(context.Context) error) {
	n.t.Helper()
	d := n.cur
	delay := time.Duration(rng.Int64N(int64(upTo)))
	done := n.triggerWhileUp(ctx, d, trigger)
	select {
	case <-time.After(delay):
	case <-ctx.Done():
	}
	d.Kill()
	err := <-done
	n.t.Logf("%s: killed %s after %s (request: %v)", what, d.Name(), delay.Round(time.Millisecond), err)
}
