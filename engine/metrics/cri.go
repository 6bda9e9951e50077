package metrics

import (
	"context"
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/syncer"
)

// InstrumentRuntime returns rt with every call timed in
// podsync_cri_request_duration_seconds, labelled with the CRI method and
// the call's gRPC code. GetContainerEvents is a stream: only its setup is
// timed, until the stream is established (or the call fails before).
// With nil Metrics it returns rt.
func (m *Metrics) InstrumentRuntime(rt syncer.Runtime) syncer.Runtime {
	if m == nil || rt == nil {
		return rt
	}
	return &timedRuntime{rt: rt, m: m}
}

// InstrumentImages returns is with every call but Close timed in
// podsync_cri_request_duration_seconds. With nil Metrics it returns is.
func (m *Metrics) InstrumentImages(is syncer.ImageService) syncer.ImageService {
	if m == nil || is == nil {
		return is
	}
	return &timedImages{is: is, m: m}
}

// timed runs a CRI call returning a value and records it.
func timed[T any](m *Metrics, method string, call func() (T, error)) (T, error) {
	start := time.Now()
	v, err := call()
	m.observeCRI(method, start, err)
	return v, err
}

// timedErr runs a CRI call returning only an error and records it.
func timedErr(m *Metrics, method string, call func() error) error {
	start := time.Now()
	err := call()
	m.observeCRI(method, start, err)
	return err
}

// timedRuntime is a Runtime whose calls are timed.
type timedRuntime struct {
	rt syncer.Runtime
	m  *Metrics
}

var _ syncer.Runtime = (*timedRuntime)(nil)

func (r *timedRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	return timed(r.m, "RunPodSandbox", func() (string, error) { return r.rt.RunPodSandbox(ctx, config, runtimeHandler) })
}

func (r *timedRuntime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	return timedErr(r.m, "StopPodSandbox", func() error { return r.rt.StopPodSandbox(ctx, podSandboxID) })
}

func (r *timedRuntime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	return timedErr(r.m, "RemovePodSandbox", func() error { return r.rt.RemovePodSandbox(ctx, podSandboxID) })
}

func (r *timedRuntime) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	return timed(r.m, "PodSandboxStatus", func() (*runtimeapi.PodSandboxStatusResponse, error) {
		return r.rt.PodSandboxStatus(ctx, podSandboxID, verbose)
	})
}

func (r *timedRuntime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return timed(r.m, "ListPodSandbox", func() ([]*runtimeapi.PodSandbox, error) { return r.rt.ListPodSandbox(ctx, filter) })
}

func (r *timedRuntime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return timed(r.m, "PortForward", func() (*runtimeapi.PortForwardResponse, error) { return r.rt.PortForward(ctx, req) })
}

func (r *timedRuntime) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return timed(r.m, "UpdatePodSandboxResources", func() (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
		return r.rt.UpdatePodSandboxResources(ctx, req)
	})
}

func (r *timedRuntime) CheckpointPod(ctx context.Context, options *runtimeapi.CheckpointPodRequest) error {
	return timedErr(r.m, "CheckpointPod", func() error { return r.rt.CheckpointPod(ctx, options) })
}

func (r *timedRuntime) RestorePod(ctx context.Context, options *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	return timed(r.m, "RestorePod", func() (*runtimeapi.RestorePodResponse, error) { return r.rt.RestorePod(ctx, options) })
}

func (r *timedRuntime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	return timed(r.m, "CreateContainer", func() (string, error) {
		return r.rt.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
	})
}

func (r *timedRuntime) StartContainer(ctx context.Context, containerID string) error {
	return timedErr(r.m, "StartContainer", func() error { return r.rt.StartContainer(ctx, containerID) })
}

func (r *timedRuntime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	return timedErr(r.m, "StopContainer", func() error { return r.rt.StopContainer(ctx, containerID, timeout) })
}

func (r *timedRuntime) RemoveContainer(ctx context.Context, containerID string) error {
	return timedErr(r.m, "RemoveContainer", func() error { return r.rt.RemoveContainer(ctx, containerID) })
}

func (r *timedRuntime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return timed(r.m, "ListContainers", func() ([]*runtimeapi.Container, error) { return r.rt.ListContainers(ctx, filter) })
}

func (r *timedRuntime) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	return timed(r.m, "ContainerStatus", func() (*runtimeapi.ContainerStatusResponse, error) {
		return r.rt.ContainerStatus(ctx, containerID, verbose)
	})
}

func (r *timedRuntime) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	return timedErr(r.m, "UpdateContainerResources", func() error {
		return r.rt.UpdateContainerResources(ctx, containerID, resources)
	})
}

func (r *timedRuntime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	var stderr []byte
	stdout, err := timed(r.m, "ExecSync", func() ([]byte, error) {
		var (
			out []byte
			err error
		)
		out, stderr, err = r.rt.ExecSync(ctx, containerID, cmd, timeout)
		return out, err
	})
	return stdout, stderr, err
}

func (r *timedRuntime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return timed(r.m, "Exec", func() (*runtimeapi.ExecResponse, error) { return r.rt.Exec(ctx, req) })
}

func (r *timedRuntime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return timed(r.m, "Attach", func() (*runtimeapi.AttachResponse, error) { return r.rt.Attach(ctx, req) })
}

func (r *timedRuntime) ReopenContainerLog(ctx context.Context, containerID string) error {
	return timedErr(r.m, "ReopenContainerLog", func() error { return r.rt.ReopenContainerLog(ctx, containerID) })
}

func (r *timedRuntime) CheckpointContainer(ctx context.Context, options *runtimeapi.CheckpointContainerRequest) error {
	return timedErr(r.m, "CheckpointContainer", func() error { return r.rt.CheckpointContainer(ctx, options) })
}

// GetContainerEvents times the stream's setup: from the call until the
// stream is established, or until the call fails if it never is. The
// stream's life and its end are not CRI requests and are not recorded.
func (r *timedRuntime) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	start := time.Now()
	var setUp atomic.Bool
	err := r.rt.GetContainerEvents(ctx, ch, func(c runtimeapi.RuntimeService_GetContainerEventsClient) {
		if !setUp.Swap(true) {
			r.m.observeCRI("GetContainerEvents", start, nil)
		}
		if established != nil {
			established(c)
		}
	})
	if !setUp.Swap(true) {
		r.m.observeCRI("GetContainerEvents", start, err)
	}
	return err
}

// timedImages is an ImageService whose calls are timed.
type timedImages struct {
	is syncer.ImageService
	m  *Metrics
}

var _ syncer.ImageService = (*timedImages)(nil)

func (i *timedImages) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return timed(i.m, "ListImages", func() ([]*runtimeapi.Image, error) { return i.is.ListImages(ctx, filter) })
}

func (i *timedImages) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	return timed(i.m, "ImageStatus", func() (*runtimeapi.ImageStatusResponse, error) { return i.is.ImageStatus(ctx, image, verbose) })
}

func (i *timedImages) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	return timed(i.m, "PullImage", func() (string, error) { return i.is.PullImage(ctx, image, auth, podSandboxConfig) })
}

func (i *timedImages) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	return timedErr(i.m, "RemoveImage", func() error { return i.is.RemoveImage(ctx, image) })
}

func (i *timedImages) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return timed(i.m, "ImageFsInfo", func() (*runtimeapi.ImageFsInfoResponse, error) { return i.is.ImageFsInfo(ctx) })
}

// Close closes the wrapped service; it is not a CRI call and is not timed.
func (i *timedImages) Close(ctx context.Context) error { return i.is.Close(ctx) }

// Version times the wrapped runtime's Version; a runtime without one
// gives syncer.ErrNoVersion.
func (r *timedRuntime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	v, ok := r.rt.(syncer.Versioner)
	if !ok {
		return nil, syncer.ErrNoVersion
	}
	return timed(r.m, "Version", func() (*runtimeapi.VersionResponse, error) { return v.Version(ctx, apiVersion) })
}

// ContainerStats times the wrapped runtime's ContainerStats; a runtime
// without one gives syncer.ErrNoContainerStats.
func (r *timedRuntime) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	s, ok := r.rt.(syncer.ContainerStatser)
	if !ok {
		return nil, syncer.ErrNoContainerStats
	}
	return timed(r.m, "ContainerStats", func() (*runtimeapi.ContainerStats, error) { return s.ContainerStats(ctx, containerID) })
}

// ListContainerStats times the wrapped runtime's ListContainerStats; a
// runtime without one gives syncer.ErrNoContainerStats.
func (r *timedRuntime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	l, ok := r.rt.(syncer.ContainerStatsLister)
	if !ok {
		return nil, syncer.ErrNoContainerStats
	}
	return timed(r.m, "ListContainerStats", func() ([]*runtimeapi.ContainerStats, error) { return l.ListContainerStats(ctx, filter) })
}
