package provider

import (
	"context"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	utilexec "k8s.io/utils/exec"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// streams are the kubelet API's streams of a session as the SDK's; the
// terminal sizes are forwarded until ctx ends.
func streams(ctx context.Context, a api.AttachIO) client.StreamOptions {
	o := client.StreamOptions{TTY: a.TTY()}
	if in := a.Stdin(); in != nil {
		o.Stdin = in
	}
	if out := a.Stdout(); out != nil {
		o.Stdout = out
	}
	if e := a.Stderr(); e != nil {
		o.Stderr = e
	}
	if a.TTY() && a.Resize() != nil {
		sizes := make(chan client.TerminalSize)
		go func() {
			defer close(sizes)
			for {
				select {
				case <-ctx.Done():
					return
				case sz, ok := <-a.Resize():
					if !ok {
						return
					}
					select {
					case sizes <- client.TerminalSize{Width: sz.Width, Height: sz.Height}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
		o.TerminalSizes = sizes
	}
	return o
}

// exitError is a session's non-zero exit code as the kubelet reports it:
// the kubelet API's remotecommand turns it into kubectl's exit code.
func exitError(what string, code int) error {
	if code == 0 {
		return nil
	}
	return utilexec.CodeExitError{Err: fmt.Errorf("%s exited with %d", what, code), Code: code}
}

// RunInContainer runs cmd in a container over podsyncd's Exec, as the
// kubelet API's /exec (kubectl exec).
func (p *Provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, a api.AttachIO) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	code, err := p.ps.Exec(ctx, client.ExecOptions{Namespace: namespace, Name: podName, Container: containerName,
		Command: cmd, StreamOptions: streams(ctx, a)})
	if err != nil {
		return fmt.Errorf("exec in %s/%s on podsync: %w", namespace, podName, err)
	}
	return exitError(fmt.Sprintf("command %q", cmd), code)
}

// AttachToContainer attaches to a container's main process over
// podsyncd's Attach, as the kubelet API's /attach (kubectl attach).
func (p *Provider) AttachToContainer(ctx context.Context, namespace, podName, containerName string, a api.AttachIO) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	code, err := p.ps.Attach(ctx, client.AttachOptions{Namespace: namespace, Name: podName, Container: containerName,
		StreamOptions: streams(ctx, a)})
	if err != nil {
		return fmt.Errorf("attach to %s/%s on podsync: %w", namespace, podName, err)
	}
	return exitError("container "+containerName, code)
}

// PortForward forwards one connection to a port of the pod over
// podsyncd's PortForward, as the kubelet API's /portforward.
func (p *Provider) PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("port-forward to %s/%s: port %d is not a port number", namespace, podName, port)
	}
	if err := p.ps.PortForward(ctx, namespace, podName, uint32(port), stream); err != nil {
		return fmt.Errorf("port-forward to %s/%s port %d on podsync: %w", namespace, podName, port, err)
	}
	return nil
}

// GetStatsSummary is the kubelet's /stats/summary of this node's pods,
// from podsyncd's ListPodStats (its own pods only: those podsync-vk
// created). The node's own numbers are not known to podsyncd and left
// out.
func (p *Provider) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	all, err := p.ps.ListPodStats(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("pod stats on podsync: %w", err)
	}
	p.mu.Lock()
	starts := map[string]metav1.Time{}
	for k, pod := range p.pods {
		if st := p.statusLocked(k); st != nil && st.StartTime != nil {
			starts[string(pod.UID)] = *st.StartTime
		}
	}
	p.mu.Unlock()
	out := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: p.node}}
	for _, ps := range all {
		if !p.owns(ps.GetNamespace(), ps.GetName(), ps.GetUid()) {
			continue
		}
		out.Pods = append(out.Pods, podStats(ps, starts[ps.GetUid()]))
	}
	return out, nil
}

// owns says whether the pod is one this node was given.
func (p *Provider) owns(namespace, name, uid string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod, ok := p.pods[key(namespace, name)]
	return ok && string(pod.UID) == uid
}

func podStats(in *podsyncv1.PodStats, start metav1.Time) statsv1alpha1.PodStats {
	out := statsv1alpha1.PodStats{
		PodRef:    statsv1alpha1.PodReference{Namespace: in.GetNamespace(), Name: in.GetName(), UID: in.GetUid()},
		StartTime: start,
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
	return &statsv1alpha1.MemoryStats{Time: metav1.NewTime(in.GetTime().AsTime()),
		WorkingSetBytes: new(in.GetWorkingSetBytes()), RSSBytes: new(in.GetRssBytes()), UsageBytes: new(in.GetUsageBytes())}
}
