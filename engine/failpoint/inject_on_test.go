//go:build failpoints

package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary a child that hits a failpoint.
const helperEnv = "PODSYNC_FAILPOINT_TEST_CHILD"

func TestMain(m *testing.M) {
	if marker := os.Getenv(helperEnv); marker != "" {
		child(marker)
		return
	}
	mainWithLeakCheck(m)
}

// child hits after-store-put three times, then waits a second; a
// deferred write of marker must not happen if the process dies.
func child(marker string) {
	defer func() { _ = os.WriteFile(marker, []byte("deferred ran"), 0o600) }()
	for range 3 {
		Inject(AfterStorePut)
	}
	time.Sleep(time.Second)
}

// runChild runs the test binary as a child with spec armed and returns
// how it ended, its stderr and whether its deferred function ran.
func runChild(t *testing.T, spec string) (*os.ProcessState, string, bool) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "marker")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+marker, EnvVar+"="+spec)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run child: %v", err)
	}
	_, statErr := os.Stat(marker)
	return cmd.ProcessState, stderr.String(), statErr == nil
}

func TestExitKillsAtTheNthHit(t *testing.T) {
	ps, stderr, deferred := runChild(t, AfterStorePut+"=exit@2")
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL; stderr:\n%s", ps, stderr)
	}
	if deferred {
		t.Error("a deferred function ran in a process killed by a failpoint")
	}
	if !strings.Contains(stderr, "podsync failpoint after-store-put fired on hit 2: exit@2") {
		t.Errorf("stderr does not report the failpoint:\n%s", stderr)
	}
}

func TestDelayedExitKillsWhileTheCallerGoesOn(t *testing.T) {
	ps, stderr, deferred := runChild(t, AfterStorePut+"=exit(100ms)@3")
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL || deferred {
		t.Fatalf("child ended with %v (deferred ran: %v), want killed by SIGKILL during its wait; stderr:\n%s", ps, deferred, stderr)
	}
}

func TestUnfiredPointLetsTheProcessEnd(t *testing.T) {
	ps, stderr, deferred := runChild(t, AfterStorePut+"=exit@4")
	if !ps.Success() || !deferred {
		t.Fatalf("child ended with %v (deferred ran: %v), want a clean exit; stderr:\n%s", ps, deferred, stderr)
	}
}

func TestInvalidSpecExits2(t *testing.T) {
	ps, stderr, _ := runChild(t, "nowhere=exit")
	if ps.ExitCode() != 2 || !strings.Contains(stderr, "unknown name") {
		t.Fatalf("child ended with %v, want exit 2 naming the error; stderr:\n%s", ps, stderr)
	}
}

func TestSleepEveryHit(t *testing.T) {
	old := armed
	t.Cleanup(func() { armed = old })
	armed = map[string]*armedPoint{BeforeImagePull: {Action: Action{Kind: Sleep, Duration: 20 * time.Millisecond}}}
	start := time.Now()
	Inject(BeforeImagePull)
	Inject(BeforeImagePull)
	Inject(AfterStorePut)
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("two hits of a sleep(20ms) point took %s", d)
	}
	if n := armed[BeforeImagePull].hits.Load(); n != 2 {
		t.Errorf("hits %d, want 2", n)
	}
}

// TestOffTurnsTheCheckOff: a point armed "off" makes Skip true for it
// alone, and its Inject does nothing.
func TestOffTurnsTheCheckOff(t *testing.T) {
	saved := armed
	t.Cleanup(func() { armed = saved })
	armed = arm(SkipPreconditions + "=off")
	if !Skip(SkipPreconditions) {
		t.Error("Skip(skip-preconditions) is false with the point armed off")
	}
	if Skip(StoreCommit) {
		t.Error("Skip(store-commit) is true without the point armed")
	}
	Inject(SkipPreconditions) // must return at once
}
