package main

import (
	"strings"
	"testing"
)

func TestParseBusyTicks(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	got, err := parseBusyTicks("cpu  100 5 50 9000 400 3 2 1 0 0")
	if err != nil || got != 161 {
		t.Errorf("busy = %v, %v; want 161 (idle and iowait left out)", got, err)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if _, err := parseBusyTicks(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestClusterReportCPU(t *testing.T) {
	cfg, err := parseFlags([]string{"-cluster", "-cluster-n", "10", "-cluster-rounds", "2"}, "/repo")
	if err != nil {
		t.Fatal(err)
	}
	res := &clusterResults{}
	for round := 1; round <= 2; round++ {
		p, k := clusterRunOf(nodePodsync, round, 10, 2000), clusterRunOf(nodeKubelet, round, 10, 2500)
		p.scaleDownGone, k.scaleDownGone = 1000, 1000
		// Per pod in round 1: machine 380 ms, agent 20, runtime 250,
		// control plane 60, remainder 50; round 2 twice as much.
		f := float64(round)
		p.upCPU = cpuUse{cpuMachine: 3800 * f, cpuAgent: 200 * f, cpuRuntime: 2500 * f, cpuControlPlane: 600 * f}
		k.upCPU = cpuUse{cpuMachine: 4800 * f, cpuAgent: 500 * f, cpuRuntime: 2600 * f, cpuControlPlane: 700 * f}
		p.downCPU = cpuUse{cpuMachine: 2000, cpuAgent: 100, cpuRuntime: 1500, cpuControlPlane: 300}
		k.downCPU = cpuUse{cpuMachine: 1500, cpuAgent: 300, cpuRuntime: 900, cpuControlPlane: 200}
		res.runs = append(res.runs, p, k)
	}
	res.runs[0].cpuErr = "threads of 42: none listed"
	out := renderClusterReport(res, cfg)
	for _, want := range []string{
		// The podsync node's first round has no CPU: its second alone.
		"| the whole machine | 760 ms (760 ms–760 ms) [1 failed] | 720 ms (480 ms–960 ms) | 200 ms (200 ms–200 ms) [1 failed] | 150 ms (150 ms–150 ms) |",
		"| the node's agent (podsyncd and podsync-vk; the kubelet) | 40.0 ms (40.0 ms–40.0 ms) [1 failed] | 75.0 ms (50.0 ms–100 ms) |",
		"| the remainder | 100 ms (100 ms–100 ms) [1 failed] | 150 ms (100 ms–200 ms) | 10.0 ms (10.0 ms–10.0 ms) [1 failed] | 10.0 ms (10.0 ms–10.0 ms) |",
		// 7600 ms of CPU in 2000 ms: 3.80 cores; the kubelet's 4800 and
		// 9600 in 2500 ms.
		"| cores busy | 3.80 (3.80–3.80) | 2.88 (1.92–3.84) | 2.00 (2.00–2.00) | 1.50 (1.50–1.50) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
