package hollow

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/clock"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
)

// Usage every running container reports, and what its pod's sandbox adds.
const (
	// ContainerNanoCores is a running container's CPU: a millicore.
	ContainerNanoCores = 1_000_000
	// ContainerMemoryBytes is a running container's working set: 4 MiB.
	ContainerMemoryBytes = 4 << 20
	// SandboxMemoryBytes is what a ready sandbox adds to its pod's
	// memory (the pause process's share).
	SandboxMemoryBytes = 512 << 10
)

// ErrNoStreams is the error of Exec, Attach and PortForward: a hollow
// node's containers run no processes to stream from. It wraps
// errdefs.ErrStreamFailed, so that callers of podsyncd's API read the
// reason (UNAVAILABLE, STREAM_FAILED) rather than an internal error.
var ErrNoStreams = fmt.Errorf("a hollow podsync node simulates its containers and serves no exec, attach or "+
	"port-forward (its exec probes and hooks run through ExecSync): %w", errdefs.ErrStreamFailed)

// Runtime is a hollow node's container runtime: an enginetest.FakeRuntime
// with timed sleeps, safe for concurrent use, that keeps no log of its
// calls (a node runs for hours), serves plausible stats and refuses
// streams (see the package documentation).
type Runtime struct {
	*enginetest.FakeRuntime
	clock clock.PassiveClock
}

var _ enginetest.Runtime = (*Runtime)(nil)

// NewRuntime returns an empty runtime on the real clock.
func NewRuntime() *Runtime {
	return newRuntime(clock.RealClock{})
}

// newRuntime returns an empty runtime on c.
func newRuntime(c clock.WithTickerAndDelayedExecution) *Runtime {
	return &Runtime{
		FakeRuntime: enginetest.NewRuntime(enginetest.WithClock(c), enginetest.WithTimedSleeps(c)),
		clock:       c,
	}
}

// forget empties the call logs of the embedded fakes, which record every
// call for tests' assertions: calls of the node's periodic work (relist,
// health) forget, so that the logs never hold more than what happened
// since the last of them.
func (r *Runtime) forget() {
	r.Lock() // the embedded service's lock
	r.Called = r.Called[:0]
	r.Unlock()
	r.Images.Lock()
	r.Images.Called = r.Images.Called[:0]
	r.Images.Unlock()
}

// Version answers as the fake does, and forgets the calls (the health
// probe asks every few seconds).
func (r *Runtime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	defer r.forget()
	return r.FakeRuntime.Version(ctx, apiVersion)
}

// ListPodSandbox answers as the fake does, and forgets the calls (the
// relist).
func (r *Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	defer r.forget()
	return r.FakeRuntime.ListPodSandbox(ctx, filter)
}

// ListContainers answers as the fake does, and forgets the calls (the
// relist).
func (r *Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	defer r.forget()
	return r.FakeRuntime.ListContainers(ctx, filter)
}

// PullImage holds the image at once: a pull needs no network. An image
// held already is not pulled again (the embedded fake remembers every
// pull).
func (r *Runtime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	r.Images.Lock()
	img, ok := r.Images.Images[image.GetImage()]
	r.Images.Unlock()
	if ok {
		return img.GetId(), nil
	}
	return r.FakeRuntime.PullImage(ctx, image, auth, sandbox)
}

// Exec refuses: ErrNoStreams.
func (r *Runtime) Exec(context.Context, *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return nil, ErrNoStreams
}

// Attach refuses: ErrNoStreams.
func (r *Runtime) Attach(context.Context, *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return nil, ErrNoStreams
}

// PortForward refuses: ErrNoStreams.
func (r *Runtime) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, ErrNoStreams
}

// ContainerStats reports a container's usage (containerUsage) with its
// writable layer's.
func (r *Runtime) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	st, err := r.FakeRuntime.ContainerStats(ctx, containerID)
	if err != nil {
		return nil, err
	}
	r.Lock() // the embedded service's lock
	defer r.Unlock()
	r.addUsage(st)
	return st, nil
}

// ListContainerStats reports the usage of the containers the filter
// selects, as ContainerStats, and forgets the calls (podsync-vk asks
// for the stats summary periodically).
func (r *Runtime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	defer r.forget()
	sts, err := r.FakeRuntime.ListContainerStats(ctx, filter)
	if err != nil {
		return nil, err
	}
	r.Lock() // the embedded service's lock
	defer r.Unlock()
	for _, st := range sts {
		r.addUsage(st)
	}
	return sts, nil
}

// PodSandboxStats reports a sandbox's usage: its running containers' and
// SandboxMemoryBytes while it is ready.
func (r *Runtime) PodSandboxStats(_ context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error) {
	r.Lock() // the embedded service's lock
	defer r.Unlock()
	s, ok := r.Sandboxes[podSandboxID]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod sandbox %q not found", podSandboxID)
	}
	return r.sandboxStats(s), nil
}

// ListPodSandboxStats reports the usage of every sandbox the filter
// selects, as PodSandboxStats.
func (r *Runtime) ListPodSandboxStats(_ context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	defer r.forget()
	r.Lock() // the embedded service's lock
	defer r.Unlock()
	var out []*runtimeapi.PodSandboxStats
	for _, s := range r.Sandboxes {
		if filter.GetId() != "" && filter.GetId() != s.Id || !labelsMatch(filter.GetLabelSelector(), s.Labels) {
			continue
		}
		out = append(out, r.sandboxStats(s))
	}
	return out, nil
}

// addUsage fills a container's CPU and memory in st; the caller holds
// the fake's lock.
func (r *Runtime) addUsage(st *runtimeapi.ContainerStats) {
	now := r.clock.Now()
	c, ok := r.Containers[st.GetAttributes().GetId()]
	if !ok {
		return
	}
	cpu, mem := containerUsage(c, now)
	st.Cpu, st.Memory = cpu, mem
}

// sandboxStats is the usage of sandbox s; the caller holds the fake's
// lock.
func (r *Runtime) sandboxStats(s *critest.FakePodSandbox) *runtimeapi.PodSandboxStats {
	now := r.clock.Now()
	var cores, usage, mem uint64
	if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		mem = SandboxMemoryBytes
	}
	for _, c := range r.Containers {
		if c.SandboxID != s.Id {
			continue
		}
		cpu, m := containerUsage(c, now)
		cores += cpu.GetUsageNanoCores().GetValue()
		usage += cpu.GetUsageCoreNanoSeconds().GetValue()
		mem += m.GetWorkingSetBytes().GetValue()
	}
	ts := now.UnixNano()
	return &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: s.Id, Metadata: s.Metadata, Labels: s.Labels, Annotations: s.Annotations},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu: &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: usage},
				UsageNanoCores: &runtimeapi.UInt64Value{Value: cores}},
			Memory: &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: &runtimeapi.UInt64Value{Value: mem},
				RssBytes: &runtimeapi.UInt64Value{Value: mem}, UsageBytes: &runtimeapi.UInt64Value{Value: mem}},
			Network: &runtimeapi.NetworkUsage{Timestamp: ts, DefaultInterface: &runtimeapi.NetworkInterfaceUsage{Name: "eth0",
				RxBytes: &runtimeapi.UInt64Value{}, TxBytes: &runtimeapi.UInt64Value{},
				RxErrors: &runtimeapi.UInt64Value{}, TxErrors: &runtimeapi.UInt64Value{}}},
		},
	}
}

// containerUsage is what container c has used by now: a millicore from
// its start to its exit (or now) and 4 MiB while it runs.
func containerUsage(c *critest.FakeContainer, now time.Time) (*runtimeapi.CpuUsage, *runtimeapi.MemoryUsage) {
	ts := now.UnixNano()
	var cores, mem, usage uint64
	end := now.UnixNano()
	if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		cores, mem = ContainerNanoCores, ContainerMemoryBytes
	} else if c.FinishedAt > 0 {
		end = c.FinishedAt
	}
	if c.StartedAt > 0 && end > c.StartedAt {
		usage = uint64(end-c.StartedAt) / (1e9 / ContainerNanoCores)
	}
	return &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: usage},
			UsageNanoCores: &runtimeapi.UInt64Value{Value: cores}},
		&runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: &runtimeapi.UInt64Value{Value: mem},
			RssBytes: &runtimeapi.UInt64Value{Value: mem}, UsageBytes: &runtimeapi.UInt64Value{Value: mem}}
}

// labelsMatch reports whether labels hold every key and value of sel.
func labelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
