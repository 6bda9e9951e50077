package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/podsync/podsync/internal/testing/localcri"
)

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
func ticksToMS(t float64) float64 { return t * 1000 / localcri.ClockTicks }

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
	t, err := localcri.ProcCPU(pid)
	if err != nil {
		s.err = fmt.Errorf("containerd cpu: %w", err)
	}
	s.containerd = t.Self + t.Children
	for _, sp := range localcri.ShimPIDs(socket) {
		if st, err := localcri.ProcCPU(sp); err == nil {
			s.shims[sp] = st.Self + st.Children
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
