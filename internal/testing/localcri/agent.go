package localcri

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Agent is a node agent under measurement (podsyncd, the kubelet) that a
// tool runs beside a private containerd, as a child process in its own
// process group. The zero Agent has not started.
type Agent struct {
	// PID is the process's, 0 before Start.
	PID  int
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts cmd in its own process group with its output appended to
// logf (the child keeps its own copy: the caller may close logf).
func (a *Agent) Start(cmd *exec.Cmd, logf *os.File) error {
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	a.cmd, a.PID, a.done = cmd, cmd.Process.Pid, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(a.done)
	}()
	return nil
}

// Started reports whether Start succeeded.
func (a *Agent) Started() bool { return a.done != nil }

// Done is closed when the process has exited; nil before Start.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Stop sends SIGTERM and waits for the process to exit, up to grace;
// then it sends SIGKILL to the process group: to the process if it is
// still there, and to whatever it started and left behind. It returns
// once the process has exited. A process never started is left alone.
func (a *Agent) Stop(grace time.Duration) {
	if !a.Started() {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(grace):
	}
	_ = syscall.Kill(-a.PID, syscall.SIGKILL)
	<-a.done
}

// KubeletSysctls are the files under /proc/sys that the kubelet's
// setupKernelTunables writes: the tools that run a kubelet beside a
// private containerd bind-mount a file holding the host's value over each
// in the kubelet's own mount namespace, so that the host's stay as they
// are.
var KubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// ClockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times.
var ClockTicks = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && v > 0 {
			return float64(v)
		}
	}
	return 100
}()

// CPUTimes are a process's CPU times in clock ticks: its own (utime +
// stime) and those of its waited-for children (cutime + cstime: runc for
// a shim, CNI plugins for containerd).
type CPUTimes struct {
	Self, Children float64
}

// Seconds is the sum of both, in seconds.
func (c CPUTimes) Seconds() float64 { return (c.Self + c.Children) / ClockTicks }

// ProcCPU reads the CPU times of pid from /proc/<pid>/stat.
func ProcCPU(pid int) (CPUTimes, error) {
	f, err := statFields(pid)
	if err != nil {
		return CPUTimes{}, err
	}
	// f[0] is field 3 (state); utime is field 14, stime 15, cutime 16,
	// cstime 17.
	if len(f) < 15 {
		return CPUTimes{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var v [4]float64
	for k := range v {
		n, err := strconv.ParseFloat(f[11+k], 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		v[k] = n
	}
	return CPUTimes{Self: v[0] + v[1], Children: v[2] + v[3]}, nil
}
