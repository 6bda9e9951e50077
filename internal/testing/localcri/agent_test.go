package localcri

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestAgentStop: an agent that exits on SIGTERM is stopped by it; one
// that ignores it is killed once the grace period is over. Done is closed
// either way, nothing of the process group is left (the shells' sleeps),
// and an agent never started is left alone.
func TestAgentStop(t *testing.T) {
	var never Agent
	never.Stop(time.Millisecond)
	if never.Started() || never.Done() != nil {
		t.Fatal("an agent never started reports a process")
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logf.Close() }()
	for _, tc := range []struct {
		script  string
		grace   time.Duration
		atLeast time.Duration // the kill comes after the grace period, not before
	}{
		{script: "trap 'exit 0' TERM; sleep 30 & wait", grace: 20 * time.Second},
		{script: "trap '' TERM; sleep 30 & wait; sleep 30", grace: 300 * time.Millisecond, atLeast: 300 * time.Millisecond},
	} {
		var a Agent
		if err := a.Start(exec.Command("/bin/sh", "-c", tc.script), logf); err != nil {
			t.Fatal(err)
		}
		if !a.Started() || a.PID <= 0 {
			t.Fatalf("started agent: Started %v, PID %d", a.Started(), a.PID)
		}
		time.Sleep(100 * time.Millisecond) // the shell sets its trap
		start := time.Now()
		a.Stop(tc.grace)
		took := time.Since(start)
		select {
		case <-a.Done():
		default:
			t.Fatalf("%q: Done not closed after Stop", tc.script)
		}
		if took < tc.atLeast || took > tc.grace+5*time.Second {
			t.Errorf("%q: Stop took %v with a grace period of %v", tc.script, took, tc.grace)
		}
		// The shell's sleep, killed with its group, is a zombie at most
		// until init reaps it.
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			live := liveInGroup(t, a.PID)
			if len(live) == 0 {
				break
			}
			if time.Now().After(end) {
				t.Errorf("%q: processes %v of its group still run after Stop", tc.script, live)
				break
			}
		}
	}
}

// TestProcCPU reads this process's CPU times after it has used some, and
// fails for a process that does not exist.
func TestProcCPU(t *testing.T) {
	deadline := time.Now().Add(50 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = n * n
	}
	c, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if c.Self <= 0 || c.Seconds() <= 0 {
		t.Errorf("ProcCPU(self) = %+v after 50 ms of work", c)
	}
	if _, err := ProcCPU(-1); err == nil {
		t.Error("ProcCPU of no process: no error")
	}
}

// liveInGroup lists the processes of process group pgid that are not
// zombies.
func liveInGroup(t *testing.T, pgid int) []int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		f, err := statFields(pid)
		if err == nil && len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			out = append(out, pid)
		}
	}
	return out
}
