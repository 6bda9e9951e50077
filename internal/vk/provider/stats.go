package provider

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// GetStatsSummary is the kubelet's /stats/summary of this node, from
// podsyncd's ListPodStats: the node's own usage (the machine's, as
// podsyncd reads its root cgroup) and the pods this node was given (those
// podsync-vk created, not podsyncd's others). A container's start time is
// when its status says it started running, else its pod's.
func (p *Provider) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	sum, err := p.ps.StatsSummary(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("stats on podsync: %w", err)
	}
	p.mu.Lock()
	starts := map[string]startTimes{}
	// The pods this node was given, by key: their UIDs, read under the
	// same lock as their start times.
	owned := make(map[string]string, len(p.pods))
	for k, pod := range p.pods {
		owned[k] = string(pod.UID)
		st := p.statusLocked(k)
		if st == nil {
			continue
		}
		s := startTimes{containers: map[string]metav1.Time{}}
		if st.StartTime != nil {
			s.pod = *st.StartTime
		}
		for _, cs := range st.ContainerStatuses {
			if r := cs.State.Running; r != nil {
				s.containers[cs.Name] = r.StartedAt
			}
		}
		starts[string(pod.UID)] = s
	}
	p.mu.Unlock()
	out := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: p.node}}
	if n := sum.GetNode(); n != nil {
		out.Node.CPU, out.Node.Memory = cpuStats(n.GetCpu()), memoryStats(n.GetMemory())
	}
	for _, ps := range sum.GetPods() {
		if uid, ok := owned[key(ps.GetNamespace(), ps.GetName())]; !ok || uid != ps.GetUid() {
			continue
		}
		out.Pods = append(out.Pods, podStats(ps, starts[ps.GetUid()]))
	}
	return out, nil
}

// startTimes are a pod's start time and its running containers'.
type startTimes struct {
	pod        metav1.Time
	containers map[string]metav1.Time
}

func podStats(in *podsyncv1.PodStats, starts startTimes) statsv1alpha1.PodStats {
	out := statsv1alpha1.PodStats{
		PodRef:    statsv1alpha1.PodReference{Namespace: in.GetNamespace(), Name: in.GetName(), UID: in.GetUid()},
		StartTime: starts.pod,
		CPU:       cpuStats(in.GetCpu()),
		Memory:    memoryStats(in.GetMemory()),
	}
	if n := in.GetNetwork(); n != nil {
		out.Network = &statsv1alpha1.NetworkStats{
			Time: metav1.NewTime(n.GetTime().AsTime()),
			InterfaceStats: statsv1alpha1.InterfaceStats{Name: "eth0",
				RxBytes: new(n.GetRxBytes()), TxBytes: new(n.GetTxBytes()),
				RxErrors: new(n.GetRxErrors()), TxErrors: new(n.GetTxErrors())},
		}
	}
	for _, c := range in.GetContainers() {
		start, ok := starts.containers[c.GetName()]
		if !ok {
			start = starts.pod
		}
		cs := statsv1alpha1.ContainerStats{Name: c.GetName(), StartTime: start, CPU: cpuStats(c.GetCpu()), Memory: memoryStats(c.GetMemory())}
		if fs := c.GetRootfs(); fs != nil {
			cs.Rootfs = &statsv1alpha1.FsStats{Time: metav1.NewTime(fs.GetTime().AsTime()), UsedBytes: new(fs.GetUsedBytes()), InodesUsed: new(fs.GetInodesUsed())}
		}
		out.Containers = append(out.Containers, cs)
	}
	return out
}

func cpuStats(in *podsyncv1.CPUStats) *statsv1alpha1.CPUStats {
	if in == nil {
		return nil
	}
	out := &statsv1alpha1.CPUStats{Time: metav1.NewTime(in.GetTime().AsTime()), UsageCoreNanoSeconds: new(in.GetUsageCoreNanoSeconds())}
	if in.UsageNanoCores != nil {
		out.UsageNanoCores = new(in.GetUsageNanoCores())
	}
	return out
}

func memoryStats(in *podsyncv1.MemoryStats) *statsv1alpha1.MemoryStats {
	if in == nil {
		return nil
	}
	out := &statsv1alpha1.MemoryStats{Time: metav1.NewTime(in.GetTime().AsTime()),
		WorkingSetBytes: new(in.GetWorkingSetBytes()), RSSBytes: new(in.GetRssBytes()), UsageBytes: new(in.GetUsageBytes())}
	if in.AvailableBytes != nil {
		out.AvailableBytes = new(in.GetAvailableBytes())
	}
	return out
}
