//go:build integration

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// syncPod issues SyncPod for p and reads the stream to its end: the
// result, the failed steps' messages, or the stream's error.
func (n *node) syncPod(ctx context.Context, p *testPod) (*podsyncv1.SyncPodResult, []string, error) {
	stream, err := n.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: p.proto})
	if err != nil {
		return nil, nil, err
	}
	var failed []string
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, failed, errors.New("SyncPod stream ended without a result")
		}
		if err != nil {
			return nil, failed, err
		}
		if st := msg.GetStep(); st != nil && st.GetOutcome() == podsyncv1.StepOutcome_STEP_OUTCOME_FAILED {
			failed = append(failed, fmt.Sprintf("%s %s: %s: %s", st.GetAction(), st.GetTarget(), st.GetReason(), st.GetMessage()))
		}
		if r := msg.GetResult(); r != nil {
			return r, failed, nil
		}
	}
}

// goroutinesNow scrapes podsyncd's goroutine count, failing the test on an
// error.
func (n *node) goroutinesNow(ctx context.Context) int {
	n.t.Helper()
	g, err := n.goroutines(ctx)
	if err != nil {
		n.t.Fatalf("scrape go_goroutines: %v", err)
	}
	return g
}

// maxGoroutineGrowth bounds the goroutines podsyncd may gain while the
// runtime is away: a few per pod worker and stream, not one per retry.
const maxGoroutineGrowth = 60

// TestContainerdStoppedMidRun stops containerd while a RunPods of 19 pods
// runs: the call ends with UNAVAILABLE within 10 s, so do new calls;
// health turns NOT_SERVING; podsyncd's goroutines do not pile up. Once
// containerd is back, health is SERVING again and the same batch runs.
func TestContainerdStoppedMidRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	n := newNode(t)
	n.metricsAddr = freeAddr(t)
	d := n.startServing()
	t.Cleanup(func() {
		if inst.PID() == 0 {
			if err := inst.Start(context.WithoutCancel(ctx)); err != nil {
				t.Errorf("restart containerd: %v", err)
			}
		}
	})
	base := n.goroutinesNow(ctx)

	batch := newBatch(t, "stopped", nil)
	stepped := make(chan struct{})
	type outcome struct {
		err error
		at  time.Time
	}
	ended := make(chan outcome, 1)
	go func() {
		var once bool
		_, err := n.runPods(ctx, batch, func(m *podsyncv1.RunPodsResponse) {
			if m.GetStep() != nil && !once {
				once = true
				close(stepped)
			}
		})
		ended <- outcome{err, time.Now()}
	}()
	select {
	case <-stepped:
	case o := <-ended:
		t.Fatalf("RunPods ended before its first step: %v", o.err)
	}
	stoppedAt := time.Now()
	if err := inst.Stop(ctx); err != nil {
		t.Fatalf("stop containerd: %v", err)
	}
	t.Logf("containerd stopped %s after the first step", time.Since(stoppedAt).Round(time.Millisecond))
	var o outcome
	select {
	case o = <-ended:
	case <-time.After(time.Minute):
		t.Fatalf("RunPods still runs a minute after containerd stopped")
	}
	t.Logf("RunPods ended %s after containerd stopped: %v", o.at.Sub(stoppedAt).Round(time.Millisecond), o.err)
	if status.Code(o.err) != codes.Unavailable || o.at.Sub(stoppedAt) > 10*time.Second {
		t.Errorf("RunPods ended %s after containerd stopped with %v, want UNAVAILABLE within 10 s", o.at.Sub(stoppedAt), o.err)
	}

	late := newPod(t, "late", sleeper("app"))
	start := time.Now()
	_, _, err := n.syncPod(ctx, late)
	t.Logf("SyncPod with containerd stopped: %v after %s", err, time.Since(start).Round(time.Millisecond))
	if status.Code(err) != codes.Unavailable || time.Since(start) > 10*time.Second {
		t.Errorf("SyncPod with containerd stopped: %v after %s, want UNAVAILABLE within 10 s", err, time.Since(start))
	}
	d.awaitHealth(healthpb.HealthCheckResponse_NOT_SERVING, 10*time.Second)

	// Calls keep coming while the runtime is away; the pods' workers keep
	// retrying. Goroutines must stay bounded.
	down := n.goroutinesNow(ctx)
	for range 10 {
		_, _, _ = n.syncPod(ctx, late)
		if _, err := n.client().ListPods(ctx, &podsyncv1.ListPodsRequest{}); err != nil {
			t.Errorf("ListPods with containerd stopped: %v", err)
		}
	}
	eventually(ctx, t, "goroutines settle", func() []string {
		if g := n.goroutinesNow(ctx); g > down+maxGoroutineGrowth || g > base+2*maxGoroutineGrowth {
			return []string{fmt.Sprintf("%d goroutines (%d before the batch, %d once containerd stopped)", g, base, down)}
		}
		return nil
	})
	t.Logf("goroutines: %d before the batch, %d once containerd stopped, %d after 10 more calls", base, down, n.goroutinesNow(ctx))

	if err := inst.Start(ctx); err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	if !d.awaitServing(time.Minute) {
		t.Fatalf("%s exited", d.Name())
	}
	all := append(batch, late)
	n.runAll(ctx, all)
	n.checkConverged(ctx, all, nil, 1)
}

// TestContainerdHangs freezes containerd (SIGSTOP), so that CRI calls
// hang: a SyncPod with a 5 s deadline ends with DEADLINE_EXCEEDED in
// time, health turns NOT_SERVING and goroutines stay bounded; once
// containerd runs again (SIGCONT) the pods converge.
func TestContainerdHangs(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	n := newNode(t)
	n.metricsAddr = freeAddr(t)
	d := n.startServing()
	first := newPod(t, "first", sleeper("app"))
	n.runAll(ctx, []*testPod{first})
	base := n.goroutinesNow(ctx)

	pid := inst.PID()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	hung := newPod(t, "hung", sleeper("app"))
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	start := time.Now()
	_, _, err := n.syncPod(sctx, hung)
	scancel()
	took := time.Since(start)
	t.Logf("SyncPod with containerd frozen: %v after %s", err, took.Round(time.Millisecond))
	if status.Code(err) != codes.DeadlineExceeded || took > 10*time.Second {
		t.Errorf("SyncPod with containerd frozen: %v after %s, want DEADLINE_EXCEEDED after about 5 s", err, took)
	}
	d.awaitHealth(healthpb.HealthCheckResponse_NOT_SERVING, 10*time.Second)
	for range 10 {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		_, _, _ = n.syncPod(sctx, hung)
		scancel()
	}
	eventually(ctx, t, "goroutines settle", func() []string {
		if g := n.goroutinesNow(ctx); g > base+maxGoroutineGrowth {
			return []string{fmt.Sprintf("%d goroutines, %d before containerd froze", g, base)}
		}
		return nil
	})

	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if !d.awaitServing(time.Minute) {
		t.Fatalf("%s exited", d.Name())
	}
	pods := []*testPod{first, hung}
	n.runAll(ctx, pods)
	n.checkConverged(ctx, pods, nil, 1)
}

// TestDiskFull runs podsyncd with its root directory on a 2 MiB tmpfs,
// fills it, and syncs a new pod: the call fails with RESOURCE_EXHAUSTED
// or a step fails, either naming ENOSPC ("no space left on device"); the
// store stays readable, and once space is freed a restarted podsyncd
// recovers every pod and runs the new one.
func TestDiskFull(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	mnt := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, "mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	// Registered first, so it runs last: after podsyncd stopped.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	n := newNode(t)
	n.rootDir = mnt
	n.startServing()
	pods := []*testPod{newPod(t, "a", sleeper("app")), newPod(t, "b", sleeper("app")), newPod(t, "c", sleeper("app"))}
	n.runAll(ctx, pods)

	filler := filepath.Join(mnt, "filler")
	fill(t, filler)
	full := newPod(t, "full", sleeper("app"))
	res, failed, err := n.syncPod(ctx, full)
	t.Logf("SyncPod on a full disk: err %v; failed steps %q; result %v", err, failed, res.GetStatus())
	const enospc = "no space left on device"
	switch {
	case err != nil:
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), enospc) {
			t.Errorf("SyncPod on a full disk: %v, want RESOURCE_EXHAUSTED naming %q", err, enospc)
		}
	case !strings.Contains(strings.Join(failed, "\n"), enospc):
		t.Errorf("SyncPod on a full disk succeeded without a failed step naming %q: %q", enospc, failed)
	}
	list, err := n.client().ListPods(ctx, &podsyncv1.ListPodsRequest{})
	if err != nil {
		t.Fatalf("ListPods on a full disk: %v", err)
	}
	if len(list.GetPods()) < len(pods) {
		t.Errorf("ListPods on a full disk: %d pods, want at least %d", len(list.GetPods()), len(pods))
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	n.cur.Stop()
	n.startServing()
	all := append(pods, full)
	n.runAll(ctx, all)
	n.checkConverged(ctx, all, nil, 1)
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			return
		}
	}
}
