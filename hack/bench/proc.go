package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/podsync/podsync/internal/localcri"
)

// agentProc is an agent under measurement (podsyncd, the kubelet) run as
// a child process in its own process group.
type agentProc struct {
	cmd *exec.Cmd
	pid int
	// done is closed when the process has exited.
	done chan struct{}
}

// startProc starts cmd in its own process group with its output appended
// to logf (the child keeps its own copy: the caller may close logf).
func (a *agentProc) startProc(cmd *exec.Cmd, logf *os.File) error {
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	a.cmd, a.pid, a.done = cmd, cmd.Process.Pid, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(a.done)
	}()
	return nil
}

// stopProc sends SIGTERM and, if the process has not exited after grace,
// SIGKILL; it returns once the process has exited. A process never
// started is left alone.
func (a *agentProc) stopProc(grace time.Duration) {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(grace):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times.
var clockTicks = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && v > 0 {
			return float64(v)
		}
	}
	return 100
}()

// cpuTimes are a process's CPU times in clock ticks: its own (utime +
// stime) and those of its waited-for children (cutime + cstime: runc for
// a shim, CNI plugins for containerd).
type cpuTimes struct {
	self, children float64
}

// procCPU reads /proc/<pid>/stat.
func procCPU(pid int) (cpuTimes, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuTimes{}, err
	}
	// The command name may hold spaces: fields start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return cpuTimes{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime 15, cutime 16,
	// cstime 17.
	if len(f) < 15 {
		return cpuTimes{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var v [4]float64
	for k := range v {
		n, err := strconv.ParseFloat(f[11+k], 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		v[k] = n
	}
	return cpuTimes{self: v[0] + v[1], children: v[2] + v[3]}, nil
}

// threadCPU is the on-CPU time of each thread of a process in
// nanoseconds, from /proc/<pid>/task/<tid>/schedstat: exact where
// utime+stime counts 10 ms ticks.
type threadCPU map[int]int64

// procThreadCPU reads the schedstat of every thread of pid.
func procThreadCPU(pid int) (threadCPU, error) {
	dirs, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*", pid))
	if err != nil || len(dirs) == 0 {
		return nil, fmt.Errorf("threads of %d: none listed", pid)
	}
	out := threadCPU{}
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "schedstat"))
		if err != nil {
			return nil, err
		}
		f := strings.Fields(string(data))
		if len(f) < 1 {
			return nil, fmt.Errorf("%s/schedstat: malformed", d)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s/schedstat: %w", d, err)
		}
		tid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			return nil, err
		}
		out[tid] = ns
	}
	return out, nil
}

// threadCPUDeltaMS is the CPU time pid's threads used between two
// readings, in milliseconds; ok is false if a thread of the first ended
// before the second (its time is lost: use the ticks instead).
func threadCPUDeltaMS(before, after threadCPU) (ms float64, ok bool) {
	var ns int64
	for tid, v := range before {
		w, alive := after[tid]
		if !alive {
			return 0, false
		}
		ns += w - v
	}
	for tid, v := range after {
		if _, old := before[tid]; !old {
			ns += v
		}
	}
	return float64(ns) / 1e6, true
}

// ticksToMS converts clock ticks to milliseconds.
func ticksToMS(t float64) float64 { return t * 1000 / clockTicks }

// procMemory returns VmRSS and VmHWM of pid in bytes.
func procMemory(pid int) (rss, hwm int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(data)) {
		key, rest, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 1 {
			continue
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", pid, key, err)
		}
		if key == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	return rss, hwm, nil
}

// runtimeCPU is a snapshot of the CPU of a containerd and its shims, in
// clock ticks.
type runtimeCPU struct {
	containerd float64         // containerd with its children (CNI plugins)
	shims      map[int]float64 // each shim with its children (runc)
	err        error           // the first read error
}

// snapshotRuntime reads the CPU of containerd (pid) and every shim of
// socket.
func snapshotRuntime(pid int, socket string) runtimeCPU {
	s := runtimeCPU{shims: map[int]float64{}}
	t, err := procCPU(pid)
	if err != nil {
		s.err = fmt.Errorf("containerd cpu: %w", err)
	}
	s.containerd = t.self + t.children
	for _, sp := range localcri.ShimPIDs(socket) {
		if st, err := procCPU(sp); err == nil {
			s.shims[sp] = st.self + st.children
		}
	}
	return s
}

// runtimeDelta is the CPU containerd and the shims used between two
// snapshots, in milliseconds. Shims that appeared in between count whole;
// shims that exited in between are lost (snapshot before cleanup).
func runtimeDelta(before, after runtimeCPU) (containerdMS, shimsMS float64, err error) {
	if err := firstErr(before.err, after.err); err != nil {
		return 0, 0, err
	}
	var shims float64
	for pid, v := range after.shims {
		shims += v - before.shims[pid]
	}
	return ticksToMS(after.containerd - before.containerd), ticksToMS(shims), nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
