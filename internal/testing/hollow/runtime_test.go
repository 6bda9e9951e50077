package hollow

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// runPod runs a sandbox with one container of argv and returns their ids.
func runPod(ctx context.Context, t testing.TB, r *Runtime, name string, argv ...string) (string, string) {
	t.Helper()
	sb := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: name},
		LogDirectory: t.TempDir()}
	sid, err := r.RunPodSandbox(ctx, sb, "")
	if err != nil {
		t.Fatal(err)
	}
	img := &runtimeapi.ImageSpec{Image: "registry.example/app:latest"}
	if _, err := r.PullImage(ctx, img, nil, sb); err != nil {
		t.Fatal(err)
	}
	cid, err := r.CreateContainer(ctx, sid, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image: img, Command: argv, LogPath: "app.log"}, sb)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartContainer(ctx, cid); err != nil {
		t.Fatal(err)
	}
	return sid, cid
}

// TestRuntimeKeepsNoCallLog: the node's periodic calls empty the fakes'
// call logs, and a pull of an image held is not recorded again, so a
// node that runs for hours holds no more than what happened since.
func TestRuntimeKeepsNoCallLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r := NewRuntime()
	for i := range 5 {
		runPod(ctx, t, r, fmt.Sprintf("p%d", i), "sleep", "infinity")
	}
	if n := len(r.GetCalls()); n == 0 {
		t.Fatal("no calls recorded before the relist: the test proves nothing")
	}
	if _, err := r.ListPodSandbox(ctx, nil); err != nil {
		t.Fatal(err)
	}
	r.Images.Lock()
	images, pulls := len(r.Images.Images), len(r.Images.Called)
	r.Images.Unlock()
	if n := len(r.GetCalls()); n != 0 || pulls != 0 {
		t.Errorf("after a relist %d runtime and %d image calls are recorded, want none", n, pulls)
	}
	if images != 1 {
		t.Errorf("%d images held after five pulls of one, want 1", images)
	}
}

// TestRuntimeUsage: a running container reports a millicore since its
// start and 4 MiB; its sandbox adds SandboxMemoryBytes; an exited one
// reports no working set and the CPU it used until its exit.
func TestRuntimeUsage(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	r := newRuntime(clk)
	sid, cid := runPod(ctx, t, r, "web", "sh", "-c", "sleep 10; exit 0")
	clk.Step(4 * time.Second)
	st, err := r.ContainerStats(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.GetCpu().GetUsageCoreNanoSeconds().GetValue(); got != 4*ContainerNanoCores {
		t.Errorf("cpu usage after 4 s: %d ns, want %d", got, 4*ContainerNanoCores)
	}
	if st.GetCpu().GetUsageNanoCores().GetValue() != ContainerNanoCores || st.GetMemory().GetWorkingSetBytes().GetValue() != ContainerMemoryBytes {
		t.Errorf("running container's usage %v, want a millicore and 4 MiB", st)
	}
	ps, err := r.PodSandboxStats(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if got := ps.GetLinux().GetMemory().GetWorkingSetBytes().GetValue(); got != ContainerMemoryBytes+SandboxMemoryBytes {
		t.Errorf("pod working set %d, want %d", got, ContainerMemoryBytes+SandboxMemoryBytes)
	}
	clk.Step(6 * time.Second) // to the end of the sleep
	waitState(ctx, t, r, cid, runtimeapi.ContainerState_CONTAINER_EXITED)
	sts, err := r.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{PodSandboxId: sid})
	if err != nil || len(sts) != 1 {
		t.Fatalf("ListContainerStats = %v, %v; want one", sts, err)
	}
	if got := sts[0].GetCpu().GetUsageCoreNanoSeconds().GetValue(); got != 10*ContainerNanoCores || sts[0].GetMemory().GetWorkingSetBytes().GetValue() != 0 {
		t.Errorf("exited container's usage %v, want 10 ms of CPU and no working set", sts[0])
	}
	if _, err := r.PodSandboxStats(ctx, "nope"); err == nil {
		t.Error("PodSandboxStats of an unknown sandbox: no error")
	}
}

func waitState(ctx context.Context, t *testing.T, r *Runtime, id string, want runtimeapi.ContainerState) {
	t.Helper()
	for {
		st, err := r.ContainerStatus(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if st.GetStatus().GetState() == want {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("container %s is %s, want %s", id, st.GetStatus().GetState(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRuntimeManyPodsConcurrently: hundreds of pods started, listed,
// exiting on schedule and removed from many goroutines at once (run with
// -race).
func TestRuntimeManyPodsConcurrently(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r := newRuntime(clock.RealClock{})
	const workers, perWorker = 10, 30
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				name := fmt.Sprintf("w%d-p%d", w, i)
				argv := []string{"sleep", "infinity"}
				if i%2 == 0 {
					argv = []string{"sh", "-c", "sleep 0.01; exit 2"}
				}
				sid, _ := runPod(ctx, t, r, name, argv...)
				if _, err := r.ListContainers(ctx, nil); err != nil {
					t.Error(err)
				}
				if _, err := r.ListPodSandboxStats(ctx, nil); err != nil {
					t.Error(err)
				}
				if i%3 == 0 {
					if err := r.StopPodSandbox(ctx, sid); err != nil {
						t.Error(err)
					}
					if err := r.RemovePodSandbox(ctx, sid); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	sbs, err := r.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := workers * (perWorker - perWorker/3); len(sbs) != want {
		t.Errorf("%d sandboxes left, want %d", len(sbs), want)
	}
	// Every container that sleeps 10 ms exits with 2.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs, err := r.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err != nil {
			t.Fatal(err)
		}
		if want := workers * (perWorker/2 - perWorker/6); len(cs) == want {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d containers running, want %d (those that sleep forever and were not removed)", len(cs), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
