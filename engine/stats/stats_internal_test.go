package stats

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
)

// TestCPUSampleRates: a rate is the usage between two samples of a key;
// the first sample of a key takes the runtime's rate, or none; a counter
// that went back (a new container under the key) gives no rate.
func TestCPUSampleRates(t *testing.T) {
	var s cpuSamples
	t0 := time.Unix(1000, 0)
	if r := s.rate("c", t0, 5e9, nil); r != nil {
		t.Errorf("first sample without the runtime's rate: %d, want none", *r)
	}
	if r := s.rate("c", t0.Add(2*time.Second), 5e9+1e9, nil); r == nil || *r != 5e8 {
		t.Errorf("1 s of CPU over 2 s: %v, want 500000000 nano-cores", r)
	}
	if r := s.rate("d", t0, 1, ptr.To[uint64](42)); r == nil || *r != 42 {
		t.Errorf("first sample with the runtime's rate: %v, want 42", r)
	}
	if r := s.rate("c", t0.Add(3*time.Second), 1, nil); r != nil {
		t.Errorf("a counter that went back: %d, want none", *r)
	}
	s.rate("e", t0.Add(20*time.Minute), 1, nil)
	if _, ok := s.m["d"]; ok {
		t.Error("a key not sampled for 20 minutes is kept")
	}
}

// TestStatValue reads cgroup "key value" files.
func TestStatValue(t *testing.T) {
	b := []byte("cache 4096\nrss 8192\ntotal_rss 12288\ntotal_inactive_file 100\n")
	for key, want := range map[string]uint64{"rss": 8192, "total_rss": 12288, "total_inactive_file": 100, "absent": 0} {
		if got := statValue(b, key); got != want {
			t.Errorf("%s = %d, want %d", key, got, want)
		}
	}
}

// TestReadRootCgroup reads the machine's usage as cadvisor reads the root
// container: on cgroup v2 the root has no memory.current, so the usage is
// memory.stat's anon + file; on v1 the root's cpuacct.usage and
// memory.usage_in_bytes. The working set is the usage less the inactive
// file pages, never below zero.
func TestReadRootCgroup(t *testing.T) {
	write := func(t *testing.T, files map[string]string) string {
		t.Helper()
		root := t.TempDir()
		for path, data := range files {
			p := filepath.Join(root, path)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	for _, tc := range []struct {
		name    string
		files   map[string]string
		cpu     uint64
		mem     MemoryStats
		wantErr bool
	}{
		{
			name: "v2",
			files: map[string]string{
				"cgroup.controllers": "cpuset cpu io memory pids\n",
				"cpu.stat":           "usage_usec 301759512\nuser_usec 200000000\nsystem_usec 101759512\n",
				"memory.stat":        "anon 466681856\nfile 2238709760\nkernel 1000\nactive_file 724234240\ninactive_file 1514475520\n",
			},
			cpu: 301759512000,
			mem: MemoryStats{UsageBytes: 2705391616, RSSBytes: 466681856, WorkingSetBytes: 2705391616 - 1514475520},
		},
		{
			name: "v2, a cgroup namespace's root",
			files: map[string]string{
				"cgroup.controllers": "cpu memory\n",
				"cpu.stat":           "usage_usec 5\n",
				"memory.current":     "1000000\n",
				"memory.stat":        "anon 300000\nfile 600000\ninactive_file 200000\n",
			},
			cpu: 5000,
			mem: MemoryStats{UsageBytes: 1000000, RSSBytes: 300000, WorkingSetBytes: 800000},
		},
		{
			name: "v1",
			files: map[string]string{
				"cpuacct/cpuacct.usage":        "301759512040\n",
				"memory/memory.usage_in_bytes": "2703564800\n",
				"memory/memory.stat":           "cache 1\nrss 2\ntotal_cache 2238709760\ntotal_rss 466681856\ntotal_inactive_file 1514475520\n",
			},
			cpu: 301759512040,
			mem: MemoryStats{UsageBytes: 2703564800, RSSBytes: 466681856, WorkingSetBytes: 2703564800 - 1514475520},
		},
		{
			name: "v1, more inactive file than usage",
			files: map[string]string{
				"cpuacct/cpuacct.usage":        "1\n",
				"memory/memory.usage_in_bytes": "100\n",
				"memory/memory.stat":           "total_inactive_file 200\n",
			},
			cpu: 1,
			mem: MemoryStats{UsageBytes: 100},
		},
		{name: "v2 without cpu.stat", files: map[string]string{"cgroup.controllers": "", "memory.stat": "anon 1\n"}, wantErr: true},
		{name: "v1 without the memory hierarchy", files: map[string]string{"cpuacct/cpuacct.usage": "1\n"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpu, mem, err := readRootCgroup(write(t, tc.files))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("readRootCgroup = %d, %+v; want an error", cpu, mem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cpu != tc.cpu {
				t.Errorf("cpu = %d, want %d", cpu, tc.cpu)
			}
			if d := cmp.Diff(tc.mem, mem); d != "" {
				t.Errorf("memory (-want +got):\n%s", d)
			}
		})
	}
}

// TestNodeStats: the node's sample is timed by the clock, its rate comes
// from the previous sample, and what is available is the capacity less
// the working set.
func TestNodeStats(t *testing.T) {
	root := t.TempDir()
	for path, data := range map[string]string{"cpuacct/cpuacct.usage": "4000000000\n", "memory/memory.usage_in_bytes": "3000\n",
		"memory/memory.stat": "total_rss 1000\ntotal_inactive_file 500\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Unix(1_700_000_000, 0)
	clk := clocktesting.NewFakeClock(t0)
	c := New(Options{Clock: clk, Config: criconfig.Options{MemoryCapacity: 10000}})
	c.cgroupFS = root
	first, err := c.nodeStats()
	if err != nil {
		t.Fatal(err)
	}
	want := NodeStats{
		CPU:    CPUStats{Time: t0, UsageCoreNanoSeconds: 4e9},
		Memory: MemoryStats{Time: t0, UsageBytes: 3000, RSSBytes: 1000, WorkingSetBytes: 2500, AvailableBytes: ptr.To[uint64](7500)},
	}
	if d := cmp.Diff(want, first); d != "" {
		t.Errorf("first sample (-want +got):\n%s", d)
	}
	clk.Step(2 * time.Second)
	if err := os.WriteFile(filepath.Join(root, "cpuacct/cpuacct.usage"), []byte("7000000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	second, err := c.nodeStats()
	if err != nil {
		t.Fatal(err)
	}
	if r := second.CPU.UsageNanoCores; r == nil || *r != 1.5e9 {
		t.Errorf("3 s of CPU over 2 s: %v nano-cores, want 1500000000", r)
	}
	c.cgroupFS = t.TempDir()
	if _, err := c.nodeStats(); err == nil {
		t.Error("nodeStats without a cgroup file system: no error")
	}
}
