package enginetest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakePod runs a sandbox with a log directory and returns its id and config.
func fakePod(ctx context.Context, t *testing.T, rt *FakeRuntime) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"},
		LogDirectory: t.TempDir(),
	}
	id, err := rt.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	return id, cfg
}

func fakeContainer(name string, argv ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: ConformanceImage},
		Command:  argv,
		LogPath:  name + ".log",
	}
}

func TestFakeRuntimeInjectError(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rt := NewRuntime(WithImages(ConformanceImage))
	boom := status.Error(codes.Unavailable, "boom")
	rt.InjectError("RunPodSandbox", boom)
	rt.InjectError("PullImage", boom)
	if _, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "a"}}, ""); !errors.Is(err, boom) {
		t.Errorf("RunPodSandbox: %v, want the injected error", err)
	}
	if _, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: "x"}, nil, nil); !errors.Is(err, boom) {
		t.Errorf("PullImage: %v, want the injected error", err)
	}
	// Errors are used once.
	pod, cfg := fakePod(ctx, t, rt)
	if pod == "" {
		t.Fatal("no sandbox id")
	}
	if _, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: "x"}, nil, nil); err != nil {
		t.Errorf("second PullImage: %v", err)
	}
	rt.InjectError("StartContainer", boom)
	id, err := rt.CreateContainer(ctx, pod, fakeContainer("app", "sleep", "9"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); !errors.Is(err, boom) {
		t.Errorf("StartContainer: %v, want the injected error", err)
	}
	if calls := rt.GetCalls(); calls[len(calls)-1] != "StartContainer" {
		t.Errorf("calls = %v, want StartContainer last", calls)
	}
}

func TestFakeRuntimeRequiresImagesAndSandboxes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rt := NewRuntime()
	pod, cfg := fakePod(ctx, t, rt)
	if _, err := rt.CreateContainer(ctx, pod, fakeContainer("app"), cfg); !crierrors.IsNotFound(err) {
		t.Errorf("CreateContainer from an absent image: %v, want NotFound", err)
	}
	if _, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: ConformanceImage}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.CreateContainer(ctx, "no-such-sandbox", fakeContainer("app"), cfg); !crierrors.IsNotFound(err) {
		t.Errorf("CreateContainer in an unknown sandbox: %v, want NotFound", err)
	}
	id, err := rt.CreateContainer(ctx, pod, fakeContainer("app", "sleep", "9"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StopPodSandbox(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// containerd answers with a plain error (Unknown), as the fake does.
	if err := rt.StartContainer(ctx, id); err == nil || status.Code(err) != codes.Unknown {
		t.Errorf("StartContainer in a stopped sandbox: %v, want an Unknown error", err)
	}
	hostNet := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "host", Uid: "u"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}},
	}
	hid, err := rt.RunPodSandbox(ctx, hostNet, "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := rt.PodSandboxStatus(ctx, hid, false)
	if err != nil || st.GetStatus().GetNetwork().GetIp() != "" {
		t.Errorf("host-network sandbox IP = %q, %v; want none", st.GetStatus().GetNetwork().GetIp(), err)
	}
	ready, err := rt.Status(ctx, false)
	if err != nil || len(ready.GetStatus().GetConditions()) != 2 || !ready.GetStatus().GetConditions()[0].Status {
		t.Errorf("Status = %v, %v; want runtime and network ready", ready.GetStatus(), err)
	}
}

func TestFakeRuntimeExitContainerAndClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	rt := NewRuntime(WithImages(ConformanceImage), WithClock(clk))
	pod, cfg := fakePod(ctx, t, rt)
	id, err := rt.CreateContainer(ctx, pod, fakeContainer("app", "sleep", "9"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	if err := rt.WriteLog(id, "stderr", "warming up"); err != nil {
		t.Fatal(err)
	}
	if err := rt.ExitContainer(id, 42, "bye"); err != nil {
		t.Fatal(err)
	}
	st, err := rt.ContainerStatus(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	s := st.GetStatus()
	if s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 42 || s.Reason != "Error" ||
		s.StartedAt != clk.Now().Add(-time.Second).UnixNano() || s.FinishedAt != clk.Now().UnixNano() {
		t.Errorf("status after ExitContainer = %v", s)
	}
	b, err := os.ReadFile(s.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	want := "2026-01-02T03:04:06Z stderr F warming up\n2026-01-02T03:04:06Z stdout F bye\n"
	if string(b) != want {
		t.Errorf("log = %q, want %q", b, want)
	}
	if err := rt.ExitContainer(id, 0); err == nil {
		t.Error("ExitContainer of an exited container: no error")
	}
}

func TestFakeRuntimeStopExitCodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		name    string
		opts    []Option
		argv    []string
		timeout int64
		want    int32
	}{
		{"SIGTERM ends a child", nil, []string{"sleep", "9"}, 10, TermExitCode},
		{"timeout 0 kills", nil, []string{"sh", "-c", TermScript}, 0, KillExitCode},
		{"trap exit", nil, []string{"sh", "-c", TermScript}, 10, 0},
		{"configured", []Option{WithStopExitCode(0)}, []string{"sleep", "9"}, 10, 0},
		{"configured keeps traps", []Option{WithStopExitCode(1)}, []string{"sh", "-c", "trap 'exit 3' TERM; sleep 9"}, 10, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := NewRuntime(append(c.opts, WithImages(ConformanceImage))...)
			pod, cfg := fakePod(ctx, t, rt)
			id, err := rt.CreateContainer(ctx, pod, fakeContainer("app", c.argv...), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.StartContainer(ctx, id); err != nil {
				t.Fatal(err)
			}
			if err := rt.StopContainer(ctx, id, c.timeout); err != nil {
				t.Fatal(err)
			}
			st, _ := rt.ContainerStatus(ctx, id, false)
			if st.GetStatus().ExitCode != c.want {
				t.Errorf("exit code = %d, want %d", st.GetStatus().ExitCode, c.want)
			}
		})
	}
}

func TestFakeRuntimeEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rt := NewRuntime(WithImages(ConformanceImage))
	ectx, ecancel := context.WithCancel(ctx)
	events := make(chan *runtimeapi.ContainerEventResponse, 8)
	established := make(chan context.Context, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- rt.GetContainerEvents(ectx, events, func(s runtimeapi.RuntimeService_GetContainerEventsClient) {
			established <- s.Context()
		})
	}()
	if got := <-established; got != ectx {
		t.Error("the callback's stream does not carry the call's context")
	}
	pod, cfg := fakePod(ctx, t, rt)
	id, err := rt.CreateContainer(ctx, pod, fakeContainer("app", "sh", "-c", "exit 2"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemovePodSandbox(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 4 {
		ev := <-events
		got = append(got, strings.TrimSuffix(strings.TrimPrefix(ev.ContainerEventType.String(), "CONTAINER_"), "_EVENT"))
		if ev.ContainerId != id {
			t.Errorf("event for %q, want %q", ev.ContainerId, id)
		}
	}
	if strings.Join(got, " ") != "CREATED STARTED STOPPED DELETED" {
		t.Errorf("events = %v", got)
	}
	ecancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Errorf("GetContainerEvents after cancel: %v, want Canceled", err)
	}
	if rt.DroppedEvents() != 0 {
		t.Errorf("dropped %d events", rt.DroppedEvents())
	}
}

// TestFakeRuntimeTimedSleeps: with timed sleeps a container whose script
// sleeps exits when the sleep has passed, with the script's code and the
// lines written after the sleep; one stopped before that keeps the stop's
// exit code.
func TestFakeRuntimeTimedSleeps(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	rt := NewRuntime(WithImages(ConformanceImage), WithClock(clk), WithTimedSleeps(clk))
	pod, cfg := fakePod(ctx, t, rt)
	start := func(name string, argv ...string) string {
		t.Helper()
		id, err := rt.CreateContainer(ctx, pod, fakeContainer(name, argv...), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	state := func(id string) *runtimeapi.ContainerStatus {
		t.Helper()
		st, err := rt.ContainerStatus(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		return st.GetStatus()
	}
	exits := start("exits", "sh", "-c", "echo a; sleep 5; echo b; exit 3")
	stopped := start("stopped", "sleep", "5")
	forever := start("forever", "sleep", "infinity")
	clk.Step(4 * time.Second)
	for _, id := range []string{exits, stopped, forever} {
		if s := state(id); s.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("%s after 4 s of a 5 s sleep: %s, want running", id, s.GetState())
		}
	}
	if err := rt.StopContainer(ctx, stopped, 0); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	// The sleep's end runs on a goroutine of its own.
	for state(exits).GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
		if ctx.Err() != nil {
			t.Fatal("the container did not exit after its sleep")
		}
		time.Sleep(5 * time.Millisecond)
	}
	s := state(exits)
	if s.GetExitCode() != 3 || s.GetReason() != "Error" || s.GetFinishedAt() != clk.Now().UnixNano() {
		t.Errorf("exited with %d (%s) at %d, want 3 (Error) at %d", s.GetExitCode(), s.GetReason(), s.GetFinishedAt(), clk.Now().UnixNano())
	}
	b, err := os.ReadFile(s.GetLogPath())
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.Contains(got, " stdout F a\n") || !strings.HasSuffix(got, " stdout F b\n") {
		t.Errorf("log %q, want a, then b", got)
	}
	if s := state(stopped); s.GetExitCode() != KillExitCode {
		t.Errorf("stopped before its sleep ended: exit code %d, want %d", s.GetExitCode(), KillExitCode)
	}
	clk.Step(time.Hour)
	if s := state(forever); s.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("sleep infinity: %s, want running", s.GetState())
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.timers) != 0 {
		t.Errorf("%d timers left, want none", len(rt.timers))
	}
}
