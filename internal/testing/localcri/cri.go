package localcri

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"
)

// criTimeout is the per-call timeout of the CRI clients, the kubelet's
// default runtime request timeout.
const criTimeout = 2 * time.Minute

// RuntimeService returns a k8s.io/cri-client runtime service connected to
// the instance. The caller closes it with Close.
func (i *Instance) RuntimeService(ctx context.Context) (cri.RuntimeService, error) {
	rs, err := criclient.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(i.Endpoint()).
		WithConnectionTimeout(criTimeout).
		WithTracerProvider(nil).
		Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect cri runtime service: %w", err)
	}
	return rs, nil
}

// ImageService returns a k8s.io/cri-client image service connected to the
// instance. The caller closes it with Close.
func (i *Instance) ImageService(ctx context.Context) (cri.ImageManagerService, error) {
	is, err := criclient.NewRemoteImageServiceBuilder().
		WithEndpoint(i.Endpoint()).
		WithConnectionTimeout(criTimeout).
		WithTracerProvider(nil).
		Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect cri image service: %w", err)
	}
	return is, nil
}

// ProbeVersion asks the CRI runtime at endpoint (unix://…) for its version,
// for health checks of an instance started by another process.
func ProbeVersion(ctx context.Context, endpoint string) (*runtimeapi.VersionResponse, error) {
	socket, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		return nil, fmt.Errorf("endpoint %q is not unix://…", endpoint)
	}
	conn, err := dialCRI(socket)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	v, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return nil, fmt.Errorf("cri version: %w", err)
	}
	return v, nil
}

// dialCRI opens a gRPC client connection to a CRI socket.
func dialCRI(socket string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socket, err)
	}
	return conn, nil
}
