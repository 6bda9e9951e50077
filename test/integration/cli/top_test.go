//go:build integration

package cli_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTopPod: top pod shows a busy container (a yes loop) near one core
// and an idle one near zero, within 15 % of the containers' cgroup
// counters over the same window, and the pod row.
func TestTopPod(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	manifest := `apiVersion: v1
kind: Pod
metadata: {name: busy}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: burn
    image: registry.local/busybox:local
    command: ["sh", "-c", "trap 'exit 0' TERM; yes > /dev/null & wait"]
  - name: idle
    image: registry.local/busybox:local
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
`
	f := filepath.Join(t.TempDir(), "busy.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	d.mustCtl(ctx, "run", "--wait-for", "running", "--timeout", "2m", "-f", f)
	pod := d.pod(ctx, "busy")
	ids := map[string]string{}
	for _, cs := range pod.GetStatus().GetContainerStatuses() {
		ids[cs.GetName()] = strings.TrimPrefix(cs.GetContainerId(), "containerd://")
	}
	uid := pod.GetMetadata().GetUid()

	top := func() map[string]int64 {
		t.Helper()
		out := d.mustCtl(ctx, "top", "pod", "busy", "--containers")
		got := map[string]int64{}
		for _, l := range strings.Split(out, "\n")[1:] {
			f := strings.Fields(l)
			if len(f) != 4 || f[0] != "busy" {
				continue
			}
			m, err := strconv.ParseInt(strings.TrimSuffix(f[2], "m"), 10, 64)
			if err != nil {
				t.Fatalf("top pod: CPU cell %q:\n%s", f[2], out)
			}
			got[f[1]] = m
		}
		if len(got) != 2 {
			t.Fatalf("top pod busy --containers: want rows for burn and idle:\n%s", out)
		}
		return got
	}
	top() // the first sample of each container
	u0, t0 := cgroupCPU(t, uid, ids), time.Now()
	top()
	select {
	case <-ctx.Done():
	case <-time.After(3 * time.Second):
	}
	got := top()
	u1, t1 := cgroupCPU(t, uid, ids), time.Now()
	for name := range ids {
		want := float64(u1[name]-u0[name]) / t1.Sub(t0).Seconds() / 1e6 // millicores
		t.Logf("%s: top %dm, cgroup %.0fm", name, got[name], want)
		if name == "idle" {
			if got[name] > 20 || want > 20 {
				t.Errorf("idle container: top %dm, cgroup %.0fm; want both near zero", got[name], want)
			}
			continue
		}
		// The loop gets what the shared machine leaves it: near a core
		// when idle, much less under load; the cgroup says what it got.
		if want < 100 {
			t.Errorf("busy container: the cgroup shows %.0fm; want a busy loop near one core", want)
		}
		if math.Abs(float64(got[name])-want) > 0.15*want {
			t.Errorf("busy container: top %dm, cgroup %.0fm; want within 15%%", got[name], want)
		}
	}
	out := d.mustCtl(ctx, "top", "pod")
	if !hasRow(out, "NAME", "CPU(cores)", "MEMORY(bytes)") || !strings.Contains(out, "busy") {
		t.Errorf("top pod:\n%s", out)
	}
}

// cgroupCPU reads the cumulative CPU usage (ns) of each container from
// its cgroup: cgroup v1 cpuacct.usage, or v2 cpu.stat usage_usec.
func cgroupCPU(t *testing.T, uid string, ids map[string]string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for name, id := range ids {
		var paths []string
		for _, pat := range []string{
			"/sys/fs/cgroup/cpuacct/kubepods/pod%s/%s/cpuacct.usage", "/sys/fs/cgroup/cpuacct/kubepods/*/pod%s/%s/cpuacct.usage",
			"/sys/fs/cgroup/kubepods/pod%s/%s/cpu.stat", "/sys/fs/cgroup/kubepods/*/pod%s/%s/cpu.stat",
		} {
			m, _ := filepath.Glob(fmt.Sprintf(pat, uid, id))
			paths = append(paths, m...)
		}
		if len(paths) == 0 {
			t.Fatalf("no cgroup of container %s (%s) of pod %s", name, id, uid)
		}
		b, err := os.ReadFile(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(paths[0], "cpuacct.usage") {
			v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
			out[name] = v
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				out[name] = n * 1000
			}
		}
	}
	return out
}
