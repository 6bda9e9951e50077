package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// Where the CPU of a run's phase went: the whole machine's, and of it the
// node's agent, the node's containerd with its shims, and the control
// plane. Everything else (the other node idling, the benchmark, kubectl,
// shims that exited during the phase) is the machine's remainder. Read in
// clock ticks (utime + stime, with the waited-for children's: runc under
// a shim, the CNI plugins under containerd) at the phase's start and end.

// cpuPart is one row of a run's CPU.
type cpuPart int

const (
	cpuMachine cpuPart = iota
	cpuAgent
	cpuRuntime
	cpuControlPlane
	cpuParts // how many are read
	// cpuRemainder is not read: the machine's CPU less the parts'.
	cpuRemainder = cpuParts
)

// cpuPartNames name the report's rows.
var cpuPartNames = [cpuRemainder + 1]string{
	cpuMachine:      "the whole machine",
	cpuAgent:        "the node's agent (podsyncd and podsync-vk; the kubelet)",
	cpuRuntime:      "the node's containerd and its shims, with runc and the CNI plugins",
	cpuControlPlane: "the control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager)",
	cpuRemainder:    "the remainder",
}

// cpuSnap is a reading of each part, in clock ticks; shims by pid, since
// they come and go.
type cpuSnap struct {
	ticks [cpuParts]float64
	shims map[int]float64
	err   error
}

// cpuUse is the CPU of each part over a phase, in ms.
type cpuUse [cpuParts]float64

// of is part's CPU in u, cpuRemainder's included.
func (u cpuUse) of(part cpuPart) float64 {
	if part != cpuRemainder {
		return u[part]
	}
	return u[cpuMachine] - u[cpuAgent] - u[cpuRuntime] - u[cpuControlPlane]
}

// cpuSnapshot reads the machine and the parts serving node.
func (e *clusterEnv) cpuSnapshot(node clusterNode) cpuSnap {
	s := cpuSnap{shims: map[int]float64{}}
	var errs []error
	machine, err := machineBusyTicks()
	errs = append(errs, err)
	s.ticks[cpuMachine] = machine
	add := func(part cpuPart, pid int) {
		t, err := localcri.ProcCPU(pid)
		errs = append(errs, err)
		s.ticks[part] += t.Self + t.Children
	}
	rt := e.kubeletRT
	switch node {
	case nodePodsync:
		rt = e.podsyncRT
		for _, n := range e.cluster.Nodes {
			if n.Podsyncd != nil {
				add(cpuAgent, n.Podsyncd.Pid())
			}
		}
		for _, vk := range e.cluster.VKs {
			add(cpuAgent, vk.Pid())
		}
	case nodeKubelet:
		if e.kubelet == nil {
			errs = append(errs, errors.New("no kubelet"))
			break
		}
		add(cpuAgent, e.kubelet.PID)
	}
	if rt != nil {
		add(cpuRuntime, rt.PID())
		for _, pid := range localcri.ShimPIDs(rt.Socket()) {
			if t, err := localcri.ProcCPU(pid); err == nil {
				s.shims[pid] = t.Self + t.Children
			}
		}
	}
	for _, pid := range e.cluster.Kube.Pids() {
		add(cpuControlPlane, pid)
	}
	s.err = errors.Join(errs...)
	return s
}

// cpuDelta is the CPU of each part between two snapshots, in ms. A shim
// that started in between counts whole; one that exited is lost to its
// part (the machine's figure still has it).
func cpuDelta(before, after cpuSnap) (cpuUse, error) {
	var u cpuUse
	if err := errors.Join(before.err, after.err); err != nil {
		return u, err
	}
	for i := range cpuParts {
		u[i] = ticksToMS(after.ticks[i] - before.ticks[i])
	}
	var shims float64
	for pid, v := range after.shims {
		shims += v - before.shims[pid]
	}
	u[cpuRuntime] += ticksToMS(shims)
	return u, nil
}

// machineBusyTicks is the time all CPUs spent not idle, from the first
// line of /proc/stat (user, nice, system, irq, softirq and steal; idle
// and iowait left out), in clock ticks.
func machineBusyTicks() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return parseBusyTicks(line)
}

// parseBusyTicks reads the busy time of /proc/stat's "cpu" line.
func parseBusyTicks(line string) (float64, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy float64
	// user nice system idle iowait irq softirq steal
	for i, v := range f[1:9] {
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		busy += n
	}
	return busy, nil
}

// noteCPU sets *to to the CPU between two snapshots, or records why it
// cannot.
func (r *clusterRun) noteCPU(to *cpuUse, before, after cpuSnap) {
	u, err := cpuDelta(before, after)
	if err != nil {
		r.cpuErr = err.Error()
		return
	}
	*to = u
}

// phase is the run's time and CPU over the phase up (0 → N) or down
// (N → 0).
func (r *clusterRun) phase(up bool) (wall float64, u cpuUse) {
	if up {
		return r.allReady, r.upCPU
	}
	return r.scaleDownGone, r.downCPU
}

// cpuStat is part's CPU per pod over node's runs at n, in ms, for the
// phase up (0 → N) or down (N → 0); a run without its CPU counts its
// error.
func (r *clusterResults) cpuStat(node clusterNode, n int, up bool, part cpuPart) *sample {
	s := &sample{}
	for _, run := range r.runsOf(node, n) {
		switch {
		case run.err != "":
			s.errs = append(s.errs, run.err)
		case run.cpuErr != "":
			s.errs = append(s.errs, run.cpuErr)
		default:
			_, u := run.phase(up)
			s.add(u.of(part) / float64(run.pods))
		}
	}
	return s
}

// coresBusy is the machine's busy time over node's phase at n ÷ the
// phase's time: 2.00 on this machine is both cores busy throughout.
func (r *clusterResults) coresBusy(node clusterNode, n int, up bool) *sample {
	s := &sample{}
	for _, run := range r.runsOf(node, n) {
		wall, u := run.phase(up)
		if run.err != "" || run.cpuErr != "" || wall <= 0 {
			continue
		}
		s.add(u[cpuMachine] / wall)
	}
	return s
}

// renderClusterCPU renders where the CPU of each phase went, per pod.
func renderClusterCPU(w *strings.Builder, res *clusterResults, cc clusterConfig) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("### Where the CPU went\n\n" +
		"CPU time per pod over the phase (medians over the rounds, with the range), from the phase's start to its\n" +
		"end as the benchmark saw it: clock ticks of each process with its waited-for children (runc under a shim, the CNI\n" +
		"plugins under containerd), and the machine's busy time from /proc/stat. The remainder is everything else: the other\n" +
		"node idling, the benchmark and kubectl, shims that exited during the phase. *cores busy* is the machine's busy time ÷\n" +
		"the phase's time (2.00: both cores busy throughout).\n\n")
	for _, n := range cc.ns {
		p("#### N = %d\n\n| per pod | 0 → N, podsync node | 0 → N, kubelet node | N → 0, podsync node | N → 0, kubelet node |\n|---|---|---|---|---|\n", n)
		for part, name := range cpuPartNames {
			p("| %s |", name)
			for _, up := range []bool{true, false} {
				for _, node := range []clusterNode{nodePodsync, nodeKubelet} {
					p(" %s |", res.cpuStat(node, n, up, cpuPart(part)).ms())
				}
			}
			p("\n")
		}
		p("| cores busy |")
		for _, up := range []bool{true, false} {
			for _, node := range []clusterNode{nodePodsync, nodeKubelet} {
				p(" %s |", res.coresBusy(node, n, up).num("%.2f"))
			}
		}
		p("\n\n")
	}
}
