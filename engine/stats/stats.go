package stats

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// Sources of PodStats' pod-level numbers.
const (
	StatsSourceCRI    = "cri"
	StatsSourceCgroup = "cgroup"
)

// rateWait is how long a stats call waits for a second sample when it
// knows no CPU rate of a container yet.
const rateWait = time.Second

// CPUStats is CPU usage; UsageNanoCores is nil while no rate is known.
type CPUStats struct {
	Time                 time.Time
	UsageNanoCores       *uint64
	UsageCoreNanoSeconds uint64
}

// MemoryStats is memory usage.
type MemoryStats struct {
	Time                      time.Time
	WorkingSetBytes, RSSBytes uint64
	UsageBytes                uint64
	// AvailableBytes is the memory left before the limit: set for the
	// node only (its capacity less the working set).
	AvailableBytes *uint64
}

// NetworkStats is the default interface's traffic.
type NetworkStats struct {
	Time                                 time.Time
	RxBytes, TxBytes, RxErrors, TxErrors uint64
}

// FsStats is file system usage.
type FsStats struct {
	Time                  time.Time
	UsedBytes, InodesUsed uint64
}

// ContainerStats is a running container's usage.
type ContainerStats struct {
	Name   string
	CPU    CPUStats
	Memory MemoryStats
	Rootfs FsStats
}

// PodStats is a pod's usage, the kubelet's /stats/summary PodStats.
type PodStats struct {
	Namespace, Name string
	UID             types.UID
	CPU             CPUStats
	Memory          MemoryStats
	Network         NetworkStats
	Containers      []ContainerStats
	// Source is StatsSourceCRI or StatsSourceCgroup.
	Source string
}

// NodeStats is the machine's usage, the kubelet's /stats/summary
// NodeStats: its root cgroup's, as cadvisor reads it for the kubelet.
type NodeStats struct {
	CPU    CPUStats
	Memory MemoryStats
}

// Summary is the kubelet's /stats/summary: the node's usage and its
// pods'.
type Summary struct {
	// Node is the machine's usage; nil when it could not be read, and
	// NodeErr says why.
	Node    *NodeStats
	NodeErr error
	// Pods are the pods with a ready sandbox, by namespace and name.
	Pods []PodStats
}

// cpuSamples keeps the last cumulative CPU sample of each container and
// pod, to give rates between calls.
type cpuSamples struct {
	mu sync.Mutex
	m  map[string]cpuSample
}

type cpuSample struct {
	at    time.Time
	usage uint64
}

// rate records usage at t under key and returns the rate since the
// previous sample, or the runtime's (nil if zero) when there is none.
func (s *cpuSamples) rate(key string, t time.Time, usage uint64, runtime *uint64) *uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]cpuSample{}
	}
	prev, ok := s.m[key]
	s.m[key] = cpuSample{at: t, usage: usage}
	for k, v := range s.m { // forget what no call asked about for long
		if t.Sub(v.at) > 10*time.Minute {
			delete(s.m, k)
		}
	}
	if ok && t.Sub(prev.at) >= 100*time.Millisecond && usage >= prev.usage {
		r := uint64(float64(usage-prev.usage) / t.Sub(prev.at).Seconds())
		return &r
	}
	if runtime != nil && *runtime > 0 {
		r := *runtime
		return &r
	}
	return nil
}

// Pods finds the stored pods whose usage is read (engine/store's Store).
type Pods interface {
	// GetByNameShared returns the stored pod namespace/name, shared (not
	// to be changed), or an error wrapping ErrNotFound.
	GetByNameShared(namespace, name string) (*store.PodRecord, error)
	// ListShared returns the stored pods f selects, shared.
	ListShared(f store.Filter) ([]*store.PodRecord, int64, error)
}

// ViewReader reads what the runtime holds of a pod (the syncer).
type ViewReader interface {
	ReadView(ctx context.Context, uid types.UID) (model.RuntimeView, error)
}

// Options configure a Collector.
type Options struct {
	// Pods finds the pods; required.
	Pods Pods
	// Views reads the pods' sandboxes and containers; required.
	Views ViewReader
	// Stats serves the CRI stats (the runtime's client); without it every
	// call is ErrRuntimeUnavailable.
	Stats cri.ContainerStatsManager
	// Runtime reads the sandboxes' verbose status (their pid, for the
	// network counters where CRI has no pod stats); required.
	Runtime syncer.Runtime
	// Config locates the pod cgroups.
	Config criconfig.Options
	// Clock paces the second sample of a rate; nil means the real clock.
	Clock clock.Clock
	// RuntimeUnavailable, if set, reports whether the error of a CRI call
	// means that the runtime did not answer.
	RuntimeUnavailable func(error) bool
}

// Collector reads the usage of the node's pods, the kubelet's
// /stats/summary: CRI ContainerStats and PodSandboxStats, or the pod
// cgroup where the runtime has no pod stats (containerd 1.6), with CPU
// rates between calls.
type Collector struct {
	pods        Pods
	views       ViewReader
	stats       cri.ContainerStatsManager
	rt          syncer.Runtime
	cfg         criconfig.Options
	clock       clock.Clock
	unavailable func(error) bool
	// cgroupFS is where the cgroup file systems are mounted (cgroupRoot;
	// a directory in tests).
	cgroupFS string
	// samples are the last CPU sample of each container and pod.
	samples cpuSamples
}

// New returns a Collector.
func New(o Options) *Collector {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Collector{pods: o.Pods, views: o.Views, stats: o.Stats, rt: o.Runtime, cfg: o.Config, clock: o.Clock, unavailable: o.RuntimeUnavailable,
		cgroupFS: cgroupRoot}
}

// runtimeErr marks err ErrRuntimeUnavailable when the runtime did not
// answer.
func (c *Collector) runtimeErr(err error) error {
	return errdefs.RuntimeUnavailable(err, c.unavailable)
}

// PodStats returns a pod's usage. It returns ErrNotFound for an unknown
// pod, ErrNotRunning when it has no ready sandbox.
func (c *Collector) PodStats(ctx context.Context, namespace, name string) (PodStats, error) {
	rec, err := c.pods.GetByNameShared(namespace, name)
	if err != nil {
		return PodStats{}, fmt.Errorf("stats of pod %s/%s: %w", namespace, name, err)
	}
	st, err := c.collectStats(ctx, []*store.PodRecord{rec}, true)
	if err != nil {
		return PodStats{}, err
	}
	return st[0], nil
}

// Summary returns the node's usage and that of every pod of namespace
// (all if empty) with a ready sandbox, by namespace and name: the
// kubelet's /stats/summary. The node's usage is the machine's, whatever
// the namespace; when it cannot be read, Summary.NodeErr says why and the
// pods are still returned.
func (c *Collector) Summary(ctx context.Context, namespace string) (Summary, error) {
	recs, _, err := c.pods.ListShared(store.Filter{Namespace: namespace})
	if err != nil {
		return Summary{}, fmt.Errorf("list pods: %w", err)
	}
	return c.collect(ctx, recs, false, true)
}

// collectStats samples the pods (collect without the node).
func (c *Collector) collectStats(ctx context.Context, recs []*store.PodRecord, strict bool) ([]PodStats, error) {
	sum, err := c.collect(ctx, recs, strict, false)
	return sum.Pods, err
}

// collect samples the pods and, withNode, the node; when a CPU rate is
// unknown it samples once more after rateWait. With strict, a pod without
// a ready sandbox is an error; otherwise it is left out.
func (c *Collector) collect(ctx context.Context, recs []*store.PodRecord, strict, withNode bool) (Summary, error) {
	if c.stats == nil {
		return Summary{}, fmt.Errorf("stats: the runtime serves no CRI stats: %w", errdefs.ErrRuntimeUnavailable)
	}
	sample := func() (Summary, bool, error) {
		var out Summary
		missing := false
		for _, rec := range recs {
			ps, err := c.podStats(ctx, rec.Pod)
			if errors.Is(err, errdefs.ErrNotRunning) && !strict {
				continue
			}
			if err != nil {
				return Summary{}, false, err
			}
			missing = missing || ps.CPU.UsageNanoCores == nil
			for _, c := range ps.Containers {
				missing = missing || c.CPU.UsageNanoCores == nil
			}
			out.Pods = append(out.Pods, ps)
		}
		slices.SortFunc(out.Pods, func(a, b PodStats) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
		if withNode {
			ns, err := c.nodeStats()
			if err != nil {
				out.NodeErr = err
			} else {
				out.Node = &ns
				missing = missing || ns.CPU.UsageNanoCores == nil
			}
		}
		return out, missing, nil
	}
	out, missing, err := sample()
	if err != nil || !missing {
		return out, err
	}
	select {
	case <-ctx.Done():
		return out, nil
	case <-c.clock.After(rateWait):
	}
	out, _, err = sample()
	return out, err
}

// nodeStats samples the machine's usage from the root cgroup.
func (c *Collector) nodeStats() (NodeStats, error) {
	now := c.clock.Now()
	usage, mem, err := readRootCgroup(c.cgroupFS)
	if err != nil {
		return NodeStats{}, fmt.Errorf("node stats: %w", err)
	}
	mem.Time = now
	if capacity := uint64(max(c.cfg.MemoryCapacity, 0)); capacity > 0 {
		mem.AvailableBytes = new(capacity - min(capacity, mem.WorkingSetBytes))
	}
	return NodeStats{
		CPU:    CPUStats{Time: now, UsageCoreNanoSeconds: usage, UsageNanoCores: c.samples.rate("node", now, usage, nil)},
		Memory: mem,
	}, nil
}

// podStats samples one pod: its containers through CRI
// ListContainerStats, the pod through CRI PodSandboxStats or, when the
// runtime has none (containerd 1.6), the pod cgroup and the sandbox's
// network namespace.
func (c *Collector) podStats(ctx context.Context, pod *corev1.Pod) (PodStats, error) {
	view, err := c.views.ReadView(ctx, pod.UID)
	if err != nil {
		return PodStats{}, c.runtimeErr(fmt.Errorf("read pod %s/%s from the runtime: %w", pod.Namespace, pod.Name, err))
	}
	if len(view.Sandboxes) == 0 || view.Sandboxes[0].State != model.SandboxReady {
		return PodStats{}, fmt.Errorf("stats of pod %s/%s: sandbox %w", pod.Namespace, pod.Name, errdefs.ErrNotRunning)
	}
	sb := view.Sandboxes[0].ID
	ps := PodStats{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	cs, err := c.stats.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{PodSandboxId: sb})
	if err != nil {
		return PodStats{}, c.runtimeErr(fmt.Errorf("container stats of pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	for _, st := range cs {
		running := slices.ContainsFunc(view.Containers, func(i model.ContainerInstance) bool {
			return i.ID == st.GetAttributes().GetId() && i.State == model.ContainerRunning
		})
		if !running {
			continue
		}
		cst := ContainerStats{Name: st.GetAttributes().GetLabels()[model.LabelContainerName],
			CPU: c.cpuStats(st.GetAttributes().GetId(), st.GetCpu()), Memory: memoryStats(st.GetMemory())}
		if w := st.GetWritableLayer(); w != nil {
			cst.Rootfs = FsStats{Time: time.Unix(0, w.GetTimestamp()), UsedBytes: w.GetUsedBytes().GetValue(), InodesUsed: w.GetInodesUsed().GetValue()}
		}
		ps.Containers = append(ps.Containers, cst)
	}
	slices.SortFunc(ps.Containers, func(a, b ContainerStats) int { return strings.Compare(a.Name, b.Name) })

	if sbs, err := c.stats.PodSandboxStats(ctx, sb); err == nil && sbs.GetLinux().GetCpu() != nil {
		l := sbs.GetLinux()
		ps.Source = StatsSourceCRI
		ps.CPU = c.cpuStats("pod:"+string(pod.UID), l.GetCpu())
		ps.Memory = memoryStats(l.GetMemory())
		if net := l.GetNetwork(); net != nil {
			d := net.GetDefaultInterface()
			ps.Network = NetworkStats{Time: time.Unix(0, net.GetTimestamp()), RxBytes: d.GetRxBytes().GetValue(), TxBytes: d.GetTxBytes().GetValue(),
				RxErrors: d.GetRxErrors().GetValue(), TxErrors: d.GetTxErrors().GetValue()}
		}
		return ps, nil
	}
	ps.Source = StatsSourceCgroup
	now := c.clock.Now()
	usage, mem, err := readPodCgroup(criconfig.PodCgroupParent(pod, c.cfg))
	if err != nil {
		// No readable pod cgroup: the sum of the containers.
		for _, c := range ps.Containers {
			usage += c.CPU.UsageCoreNanoSeconds
			mem.WorkingSetBytes += c.Memory.WorkingSetBytes
			mem.RSSBytes += c.Memory.RSSBytes
			mem.UsageBytes += c.Memory.UsageBytes
		}
	}
	mem.Time = now
	ps.CPU = CPUStats{Time: now, UsageCoreNanoSeconds: usage, UsageNanoCores: c.samples.rate("pod:"+string(pod.UID), now, usage, nil)}
	ps.Memory = mem
	ps.Network = c.sandboxNetwork(ctx, sb, now)
	return ps, nil
}

func (c *Collector) cpuStats(key string, u *runtimeapi.CpuUsage) CPUStats {
	t := time.Unix(0, u.GetTimestamp())
	usage := u.GetUsageCoreNanoSeconds().GetValue()
	var runtime *uint64
	if v := u.GetUsageNanoCores(); v != nil {
		x := v.GetValue()
		runtime = &x
	}
	return CPUStats{Time: t, UsageCoreNanoSeconds: usage, UsageNanoCores: c.samples.rate(key, t, usage, runtime)}
}

func memoryStats(m *runtimeapi.MemoryUsage) MemoryStats {
	return MemoryStats{Time: time.Unix(0, m.GetTimestamp()), WorkingSetBytes: m.GetWorkingSetBytes().GetValue(),
		RSSBytes: m.GetRssBytes().GetValue(), UsageBytes: m.GetUsageBytes().GetValue()}
}

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// readRootCgroup reads the machine's CPU usage (ns) and memory from the
// root cgroup under fs (cgroupRoot), as cadvisor reads the root container
// for the kubelet's node stats. cgroup v2 (fs/cgroup.controllers): CPU is
// cpu.stat's usage_usec; the host's root has no memory.current, so the
// usage is memory.stat's anon plus file (runc's rootStatsFromMeminfo). v1:
// CPU is cpuacct.usage, memory memory.usage_in_bytes and memory.stat's
// total_* keys.
func readRootCgroup(fs string) (uint64, MemoryStats, error) {
	if _, err := os.Stat(filepath.Join(fs, "cgroup.controllers")); err == nil {
		cpu, err := os.ReadFile(filepath.Join(fs, "cpu.stat"))
		if err != nil {
			return 0, MemoryStats{}, fmt.Errorf("root cgroup cpu: %w", err)
		}
		ms, err := os.ReadFile(filepath.Join(fs, "memory.stat"))
		if err != nil {
			return 0, MemoryStats{}, fmt.Errorf("root cgroup memory: %w", err)
		}
		// A cgroup namespace's root (podsyncd in a container) is a
		// cgroup of the host's, with a memory.current of its own.
		cur, err := readUint(filepath.Join(fs, "memory.current"))
		return statValue(cpu, "usage_usec") * 1000, rootMemoryV2(ms, cur, err == nil), nil
	}
	usage, err := readUint(filepath.Join(fs, "cpuacct", "cpuacct.usage"))
	if err != nil {
		return 0, MemoryStats{}, fmt.Errorf("root cgroup cpu: %w", err)
	}
	cur, err := readUint(filepath.Join(fs, "memory", "memory.usage_in_bytes"))
	if err != nil {
		return 0, MemoryStats{}, fmt.Errorf("root cgroup memory: %w", err)
	}
	ms, err := os.ReadFile(filepath.Join(fs, "memory", "memory.stat"))
	if err != nil {
		return 0, MemoryStats{}, fmt.Errorf("root cgroup memory: %w", err)
	}
	return usage, memoryV1(cur, ms), nil
}

// rootMemoryV2 is the root cgroup's memory on cgroup v2: the usage its
// memory.current where it has one (current, ok), else memory.stat's anon +
// file as runc reads the host's root; RSS anon, the working set the usage
// less inactive_file (cadvisor's).
func rootMemoryV2(memoryStat []byte, current uint64, ok bool) MemoryStats {
	usage := statValue(memoryStat, "anon") + statValue(memoryStat, "file")
	if ok {
		usage = current
	}
	return MemoryStats{UsageBytes: usage, RSSBytes: statValue(memoryStat, "anon"),
		WorkingSetBytes: usage - min(usage, statValue(memoryStat, "inactive_file"))}
}

// memoryV1 is a cgroup v1 memory cgroup's usage: usage_in_bytes, RSS
// total_rss, the working set the usage less total_inactive_file
// (cadvisor's).
func memoryV1(usage uint64, memoryStat []byte) MemoryStats {
	return MemoryStats{UsageBytes: usage, RSSBytes: statValue(memoryStat, "total_rss"),
		WorkingSetBytes: usage - min(usage, statValue(memoryStat, "total_inactive_file"))}
}

// readPodCgroup reads a pod cgroup's CPU usage (ns) and memory, as the
// kubelet's cadvisor does: cgroup v2 (cpu.stat, memory.current,
// memory.stat) or v1 (cpuacct.usage, memory.usage_in_bytes, memory.stat).
// The working set is usage minus inactive file pages.
func readPodCgroup(parent string) (uint64, MemoryStats, error) {
	var mem MemoryStats
	if b, err := os.ReadFile(filepath.Join(cgroupRoot, parent, "cpu.stat")); err == nil { // v2
		usec := statValue(b, "usage_usec")
		cur, err := readUint(filepath.Join(cgroupRoot, parent, "memory.current"))
		if err != nil {
			return 0, mem, err
		}
		ms, _ := os.ReadFile(filepath.Join(cgroupRoot, parent, "memory.stat"))
		mem.UsageBytes, mem.RSSBytes = cur, statValue(ms, "anon")
		mem.WorkingSetBytes = cur - min(cur, statValue(ms, "inactive_file"))
		return usec * 1000, mem, nil
	}
	usage, err := readUint(filepath.Join(cgroupRoot, "cpuacct", parent, "cpuacct.usage"))
	if err != nil {
		return 0, mem, err
	}
	cur, err := readUint(filepath.Join(cgroupRoot, "memory", parent, "memory.usage_in_bytes"))
	if err != nil {
		return 0, mem, err
	}
	ms, _ := os.ReadFile(filepath.Join(cgroupRoot, "memory", parent, "memory.stat"))
	return usage, memoryV1(cur, ms), nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// statValue is the value of key in a cgroup "key value" file, 0 if absent.
func statValue(b []byte, key string) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// sandboxNetwork reads eth0's counters in the sandbox's network namespace
// through /proc/<pid>/net/dev of the sandbox's process, whose pid the
// runtime's verbose status gives (containerd's "info"). Zero if it cannot.
func (c *Collector) sandboxNetwork(ctx context.Context, sandboxID string, now time.Time) NetworkStats {
	ns := NetworkStats{Time: now}
	st, err := c.rt.PodSandboxStatus(ctx, sandboxID, true)
	if err != nil {
		return ns
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if json.Unmarshal([]byte(st.GetInfo()["info"]), &info) != nil || info.Pid <= 0 {
		return ns
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", info.Pid))
	if err != nil {
		return ns
	}
	for _, l := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok || name != "eth0" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 11 {
			return ns
		}
		u := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
		ns.RxBytes, ns.RxErrors, ns.TxBytes, ns.TxErrors = u(0), u(2), u(8), u(10)
	}
	return ns
}
