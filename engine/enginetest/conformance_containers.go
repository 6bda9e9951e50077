package enginetest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

func testExitCode(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	failing := h.Run(pod, cfg, h.ContainerConfig("fails", 0, "/bin/sh", "-c", "echo hello; exit 3"))
	st := h.WaitState(failing, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.ExitCode != 3 || st.Reason != "Error" {
		t.Errorf("exit code %d reason %q, want 3 %q", st.ExitCode, st.Reason, "Error")
	}
	// containerd takes FinishedAt from the shim's exit event and StartedAt
	// from its own clock after the start: a process that exits at once can
	// finish "before" it started. Only creation comes first.
	if st.StartedAt == 0 || st.FinishedAt == 0 || st.CreatedAt > st.StartedAt || st.CreatedAt > st.FinishedAt {
		t.Errorf("created %d started %d finished %d: want both times set, not before the creation", st.CreatedAt, st.StartedAt, st.FinishedAt)
	}
	ok := h.Run(pod, cfg, h.ContainerConfig("succeeds", 0, "/bin/sh", "-c", "exit 0"))
	st = h.WaitState(ok, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.ExitCode != 0 || st.Reason != "Completed" {
		t.Errorf("exit code %d reason %q, want 0 %q", st.ExitCode, st.Reason, "Completed")
	}
}

// criLogLine is a line of the CRI log format: time, stream, tag, message.
var criLogLine = regexp.MustCompile(`^(\S+) (stdout|stderr) ([FP]) (.*)$`)

func testLogs(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	id := h.Run(pod, cfg, h.ContainerConfig("logs", 0, "/bin/sh", "-c", "echo out-line; echo err-line >&2; exit 0"))
	st := h.WaitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	want := cfg.LogDirectory + "/logs_0.log"
	if st.LogPath != want {
		t.Fatalf("log path = %q, want %q", st.LogPath, want)
	}
	got := map[string]string{}
	// The runtime may flush the log just after the exit is reported.
	err := pollUntil(h.Ctx, func() (bool, error) {
		f, err := os.Open(st.LogPath)
		if err != nil {
			return false, nil
		}
		defer func() { _ = f.Close() }()
		s := bufio.NewScanner(f)
		for s.Scan() {
			m := criLogLine.FindStringSubmatch(s.Text())
			if m == nil {
				return false, fmt.Errorf("log line %q is not in CRI format", s.Text())
			}
			if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
				return false, fmt.Errorf("log line %q: time: %w", s.Text(), err)
			}
			if m[3] != "F" {
				return false, fmt.Errorf("log line %q: tag %q, want F", s.Text(), m[3])
			}
			got[m[4]] = m[2]
		}
		return len(got) >= 2, s.Err()
	})
	if err != nil {
		t.Fatalf("read log %s: %v (got %v)", st.LogPath, err, got)
	}
	if got["out-line"] != "stdout" || got["err-line"] != "stderr" {
		t.Errorf("log lines = %v, want out-line on stdout and err-line on stderr", got)
	}
}

func testStopGraceful(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	id := h.Run(pod, cfg, h.ContainerConfig("traps", 0, "/bin/sh", "-c", `trap "exit 0" TERM; echo `+trapped+`; while :; do sleep 1 & wait; done`))
	h.WaitLog(id, trapped)
	if err := h.RT.StopContainer(h.Ctx, id, 30); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	st := h.Status(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 0 || st.FinishedAt == 0 {
		t.Errorf("after stop: state %s exit code %d finished %d, want EXITED 0 and a finish time", st.State, st.ExitCode, st.FinishedAt)
	}
	// Stopping again does nothing.
	if err := h.RT.StopContainer(h.Ctx, id, 30); err != nil {
		t.Errorf("second StopContainer: %v", err)
	}
}

// trapped is what the trap tests' scripts log once their trap is set: a
// stop sent before the shell ran its first statement would meet SIGTERM's
// default action (a loaded machine has shown it: exit code 143).
const trapped = "trapped"

// testStopCode stops a running container made from cfg with a one second
// grace period and checks its exit code; with ready, once the container
// has logged that line.
func testStopCode(t *testing.T, h *Harness, cfg *runtimeapi.ContainerConfig, want int32, ready string) {
	pod := h.PodConfig("")
	podID := h.RunPod(pod)
	id := h.Run(podID, pod, cfg)
	h.WaitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if ready != "" {
		h.WaitLog(id, ready)
	}
	if err := h.RT.StopContainer(h.Ctx, id, 1); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	// The status is read again until it shows the exit, as the kubelet
	// does after a stop: containerd 2.x under heavy load has answered
	// RUNNING once right after StopContainer returned.
	st := h.WaitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != want || st.FinishedAt == 0 {
		t.Errorf("after stop: state %s exit code %d finished %d, want EXITED %d and a finish time", st.State, st.ExitCode, st.FinishedAt, want)
	}
}

func testStopKill(t *testing.T, h *Harness) {
	cfg := h.ContainerConfig("pid1", 0, "sleep", "3600")
	cfg.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER},
	}
	testStopCode(t, h, cfg, KillExitCode, "")
}

func testStopTerm(t *testing.T, h *Harness) {
	// The default PID namespace mode is POD: the sandbox's pause is PID 1.
	testStopCode(t, h, h.ContainerConfig("child", 0, "sleep", "3600"), TermExitCode, "")
}

func testStopIgnored(t *testing.T, h *Harness) {
	testStopCode(t, h, h.ContainerConfig("ignores", 0, "/bin/sh", "-c", `trap "" TERM; echo `+trapped+`; while :; do sleep 1 & wait; done`), KillExitCode, trapped)
}

func testAttempts(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	first := h.Run(pod, cfg, h.ContainerConfig("app", 0, "/bin/sh", "-c", "echo first; exit 1"))
	h.WaitState(first, runtimeapi.ContainerState_CONTAINER_EXITED)
	second := h.Run(pod, cfg, h.ContainerConfig("app", 1, "/bin/sh", "-c", "echo second; exit 0"))
	st := h.WaitState(second, runtimeapi.ContainerState_CONTAINER_EXITED)
	if first == second {
		t.Fatalf("both attempts have id %s", first)
	}
	if st.GetMetadata().GetAttempt() != 1 || st.ExitCode != 0 {
		t.Errorf("second attempt: metadata %v exit code %d, want attempt 1 exit code 0", st.GetMetadata(), st.ExitCode)
	}
	if old := h.Status(first); old.ExitCode != 1 || old.GetMetadata().GetAttempt() != 0 {
		t.Errorf("first attempt: metadata %v exit code %d, want attempt 0 exit code 1", old.GetMetadata(), old.ExitCode)
	}
	ctrs, err := h.RT.ListContainers(h.Ctx, &runtimeapi.ContainerFilter{PodSandboxId: pod})
	if err != nil || len(ctrs) != 2 {
		t.Errorf("ListContainers: %d containers, %v; want both attempts", len(ctrs), err)
	}
}

func testExecSync(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	id := h.Run(pod, cfg, h.ContainerConfig("app", 0, "/bin/sh", "-c", TermScript))
	h.WaitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	stdout, stderr, err := h.RT.ExecSync(h.Ctx, id, []string{"/bin/sh", "-c", "echo hi; echo oops >&2"}, 30*time.Second)
	if err != nil {
		t.Fatalf("ExecSync: %v", err)
	}
	if string(stdout) != "hi\n" || string(stderr) != "oops\n" {
		t.Errorf("ExecSync output = %q, %q; want %q, %q", stdout, stderr, "hi\n", "oops\n")
	}
	_, _, err = h.RT.ExecSync(h.Ctx, id, []string{"/bin/sh", "-c", "exit 7"}, 30*time.Second)
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 7 {
		t.Errorf("ExecSync of exit 7: %v, want an exit error with status 7", err)
	}
}

// testStopSignal: a container's status reports the stop signal it was
// created with, or none at all (containerd 1.6 knows no CRI stop signal),
// never another one: the syncer refuses a start when it reads none back.
func testStopSignal(t *testing.T, h *Harness) {
	cfg := h.PodConfig("")
	pod := h.RunPod(cfg)
	c := h.ContainerConfig("signalled", 0, "/bin/sh", "-c", TermScript)
	c.StopSignal = runtimeapi.Signal_SIGNAL_SIGUSR1
	id := h.Create(pod, cfg, c)
	if got := h.Status(id).GetStopSignal(); got != runtimeapi.Signal_SIGNAL_SIGUSR1 && got != runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		t.Errorf("stop signal %s, want SIGUSR1 (honoured) or none (ignored)", got)
	}
}
