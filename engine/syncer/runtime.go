package syncer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"

	"github.com/podsync/podsync/engine/errdefs"
)

// Runtime is the part of a CRI runtime service the engine drives: pod
// sandboxes and containers (including ExecSync for lifecycle hooks and
// GetContainerEvents for the Watcher). k8s.io/cri-client's remote runtime
// service implements it against containerd (see DialRuntime); tests use
// enginetest.FakeRuntime.
//
// Errors are the runtime's: the engine tests them with
// k8s.io/cri-api/pkg/errors.IsNotFound and otherwise reports them as they
// are.
type Runtime interface {
	cri.PodSandboxManager
	cri.ContainerManager
}

// ImageService is the CRI image service the engine pulls and inspects
// images with.
type ImageService interface {
	cri.ImageManagerService
}

// ContainerStatser is the optional capability of a Runtime to report a
// container's usage (CRI ContainerStats): its writable layer, for the
// local storage the node measures. cri-client's runtime has it.
type ContainerStatser interface {
	ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error)
}

// ContainerStatsLister is the optional capability of a Runtime to report
// the usage of many containers in one call (CRI ListContainerStats).
type ContainerStatsLister interface {
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
}

// Versioner is the optional capability of a Runtime to say what it is
// (CRI Version): the remote runtime has it, and so must every wrapper of
// one.
type Versioner interface {
	Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error)
}

// ErrNoVersion is the error of a runtime without Version (a wrapper of
// one that has none).
var ErrNoVersion = errors.New("the runtime does not say its version")

// ErrNoContainerStats is the error of a runtime without ContainerStats or
// ListContainerStats (a wrapper of one that has neither).
var ErrNoContainerStats = errors.New("the runtime does not report container stats")

// DefaultRuntimeTimeout is the per-call timeout of the CRI clients
// DialRuntime builds, the kubelet's default --runtime-request-timeout.
const DefaultRuntimeTimeout = 2 * time.Minute

// RemoteRuntime is a CRI runtime reached over its socket: both the runtime
// and the image service of k8s.io/cri-client. It implements Runtime and
// ImageService. Close it when done.
type RemoteRuntime struct {
	cri.RuntimeService
	cri.ImageManagerService
}

var (
	_ Runtime      = (*RemoteRuntime)(nil)
	_ ImageService = (*RemoteRuntime)(nil)
)

// DialRuntime connects to the CRI runtime at endpoint (for example
// "unix:///run/containerd/containerd.sock"). timeout bounds every CRI call
// but image pulls; zero means DefaultRuntimeTimeout. It fails if the
// runtime does not answer CRI's Version within the timeout. Its calls are
// not traced and carry no trace context: DialRuntimeWith.
func DialRuntime(ctx context.Context, endpoint string, timeout time.Duration) (*RemoteRuntime, error) {
	return DialRuntimeWith(ctx, endpoint, timeout, nil)
}

// DialRuntimeWith is DialRuntime whose CRI calls are traced (otelgrpc,
// k8s.io/cri-client's instrumentation): each is a client span of tp under
// the caller's span, and carries its W3C trace context to the runtime,
// which records spans of its own when its tracing is on (containerd's
// tracing processor). A no-op tp records nothing but still propagates;
// nil neither records nor propagates.
func DialRuntimeWith(ctx context.Context, endpoint string, timeout time.Duration, tp trace.TracerProvider) (*RemoteRuntime, error) {
	if timeout <= 0 {
		timeout = DefaultRuntimeTimeout
	}
	// NOTE(podsync): k8s.io/cri-client v0.37.2 leaks its gRPC connection
	// (and its goroutines) when the runtime does not answer Version: probe
	// a unix socket first, so a runtime that is not up costs nothing.
	if path, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		d := net.Dialer{Timeout: timeout}
		conn, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return nil, fmt.Errorf("connect cri runtime %s: %w", endpoint, errors.Join(errdefs.ErrRuntimeUnavailable, err))
		}
		_ = conn.Close()
	}
	rs, err := criclient.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(endpoint).
		WithConnectionTimeout(timeout).
		WithTracerProvider(tp).
		Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect cri runtime service %s: %w", endpoint, errors.Join(errdefs.ErrRuntimeUnavailable, err))
	}
	is, err := criclient.NewRemoteImageServiceBuilder().
		WithEndpoint(endpoint).
		WithConnectionTimeout(timeout).
		WithTracerProvider(tp).
		Build(ctx)
	if err != nil {
		_ = rs.Close(ctx)
		return nil, fmt.Errorf("connect cri image service %s: %w", endpoint, errors.Join(errdefs.ErrRuntimeUnavailable, err))
	}
	return &RemoteRuntime{RuntimeService: rs, ImageManagerService: is}, nil
}

// Close closes both connections.
func (r *RemoteRuntime) Close(ctx context.Context) error {
	return errors.Join(r.RuntimeService.Close(ctx), r.ImageManagerService.Close(ctx))
}
