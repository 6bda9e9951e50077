//go:build integration

package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTopPod: top pod shows a busy container (a yes loop) near one core
// and an idle one near zero, within what the containers' cgroup
// counters give over top's window, and the pod row.
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
	// top's rate on the third call is over podsyncd's samples of the
	// second and third calls, taken at moments the test cannot see; the
	// cgroup is read just before and just after each of those calls, so
	// the true rate over top's window lies between the rate of the
	// narrowest window (after the 2nd call, before the 3rd) and the
	// widest (before the 2nd, after the 3rd). A loaded machine gives the
	// loop an uneven share, so one window of a different length is no
	// measure of top. Each call takes about 0.6 s under -race, so over
	// an 8 s wait the bounds are about -13 % and +15 % of the true rate.
	type reading struct {
		u map[string]uint64
		t time.Time
	}
	read := func() reading { return reading{cgroupCPU(t, uid, ids), time.Now()} }
	top() // the first sample of each container
	c0 := read()
	top()
	c1 := read()
	select {
	case <-ctx.Done():
	case <-time.After(8 * time.Second):
	}
	c2 := read()
	got := top()
	c3 := read()
	rate := func(a, b reading, name string, over time.Duration) float64 {
		return float64(b.u[name]-a.u[name]) / over.Seconds() / 1e6 // millicores
	}
	for name := range ids {
		low := rate(c1, c2, name, c3.t.Sub(c0.t))  // the least CPU over the longest window
		high := rate(c0, c3, name, c2.t.Sub(c1.t)) // the most CPU over the shortest window
		want := rate(c0, c3, name, c3.t.Sub(c0.t))
		t.Logf("%s: top %dm, cgroup %.0fm (top's window: %.0f–%.0fm)", name, got[name], want, low, high)
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
		// 5 % beyond the bounds for the runtime's sample timestamps and
		// top's rounding to millicores.
		if g := float64(got[name]); g < 0.95*low || g > 1.05*high {
			t.Errorf("busy container: top %dm; the cgroup gives %.0f–%.0fm over top's window", got[name], low, high)
		}
	}
	out := d.mustCtl(ctx, "top", "pod")
	if !hasRow(out, "NAME", "CPU(cores)", "MEMORY(bytes)") || !strings.Contains(out, "busy") {
		t.Errorf("top pod:\n%s", out)
	}
	// top node is the machine's usage, the busy loop and everything
	// else: at least what the loop took over the narrowest window, less
	// a margin for the moments top's samples were taken.
	out = d.mustCtl(ctx, "top", "node")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 2 || !hasRow(out, "NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)") {
		t.Fatalf("top node:\n%s", out)
	}
	cells := strings.Fields(rows[1])
	cpu, err1 := strconv.ParseInt(strings.TrimSuffix(cells[1], "m"), 10, 64)
	mem, err2 := strconv.ParseInt(strings.TrimSuffix(cells[3], "Mi"), 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("top node: cells %q, %q:\n%s", cells[1], cells[3], out)
	}
	burn := rate(c1, c2, "burn", c3.t.Sub(c0.t))
	t.Logf("top node: %dm, %dMi (the busy loop: at least %.0fm)", cpu, mem, burn)
	if float64(cpu) < 0.5*burn || mem < 10 {
		t.Errorf("top node: %dm, %dMi; want the machine's, above the busy loop's %.0fm and tens of Mi", cpu, mem, burn)
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
			"/sys/fs/cgroup/cpuacct%s/kubepods/pod%s/%s/cpuacct.usage", "/sys/fs/cgroup/cpuacct%s/kubepods/*/pod%s/%s/cpuacct.usage",
			"/sys/fs/cgroup%s/kubepods/pod%s/%s/cpu.stat", "/sys/fs/cgroup%s/kubepods/*/pod%s/%s/cpu.stat",
		} {
			m, _ := filepath.Glob(fmt.Sprintf(pat, inst.CgroupRoot(), uid, id))
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
