package daemon

import (
	"context"
	"errors"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/server"
)

// backend is the service of the node running on a connected runtime.
type backend struct {
	svc podsyncv1.PodSyncServiceServer
	rt  *syncer.RemoteRuntime
}

// lateService is the PodSyncService the gRPC server is built with before
// the runtime is connected: it forwards to the current backend, and
// answers UNAVAILABLE (RUNTIME_UNAVAILABLE) while there is none.
type lateService struct {
	podsyncv1.UnimplementedPodSyncServiceServer
	cur atomic.Pointer[backend]
}

func (l *lateService) set(b *backend) { l.cur.Store(b) }

func (l *lateService) get() (podsyncv1.PodSyncServiceServer, error) {
	if b := l.cur.Load(); b != nil {
		return b.svc, nil
	}
	return nil, server.NewError(codes.Unavailable, errorinfo.ReasonRuntimeUnavailable,
		"podsyncd is not connected to the container runtime yet; retry", nil)
}

// probe is the health probe: CRI Version of the connected runtime.
func (l *lateService) probe(ctx context.Context) error {
	b := l.cur.Load()
	if b == nil {
		return errors.New("not connected to the container runtime")
	}
	_, err := b.rt.Version(ctx, "v1")
	return err
}

func (l *lateService) RunPods(req *podsyncv1.RunPodsRequest, s grpc.ServerStreamingServer[podsyncv1.RunPodsResponse]) error {
	svc, err := l.get()
	if err != nil {
		return err
	}
	return svc.RunPods(req, s)
}

func (l *lateService) SyncPod(req *podsyncv1.SyncPodRequest, s grpc.ServerStreamingServer[podsyncv1.SyncPodResponse]) error {
	svc, err := l.get()
	if err != nil {
		return err
	}
	return svc.SyncPod(req, s)
}

func (l *lateService) PlanPod(ctx context.Context, req *podsyncv1.PlanPodRequest) (*podsyncv1.PlanPodResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.PlanPod(ctx, req)
}

func (l *lateService) GetPod(ctx context.Context, req *podsyncv1.GetPodRequest) (*podsyncv1.GetPodResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.GetPod(ctx, req)
}

func (l *lateService) GetNode(ctx context.Context, req *podsyncv1.GetNodeRequest) (*podsyncv1.GetNodeResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.GetNode(ctx, req)
}

func (l *lateService) ListPods(ctx context.Context, req *podsyncv1.ListPodsRequest) (*podsyncv1.ListPodsResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.ListPods(ctx, req)
}

func (l *lateService) DeletePod(ctx context.Context, req *podsyncv1.DeletePodRequest) (*podsyncv1.DeletePodResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.DeletePod(ctx, req)
}

func (l *lateService) WatchPods(req *podsyncv1.WatchPodsRequest, s grpc.ServerStreamingServer[podsyncv1.WatchPodsResponse]) error {
	svc, err := l.get()
	if err != nil {
		return err
	}
	return svc.WatchPods(req, s)
}

func (l *lateService) GetContainerLogs(req *podsyncv1.GetContainerLogsRequest, s grpc.ServerStreamingServer[podsyncv1.GetContainerLogsResponse]) error {
	svc, err := l.get()
	if err != nil {
		return err
	}
	return svc.GetContainerLogs(req, s)
}

func (l *lateService) ListVolumes(ctx context.Context, req *podsyncv1.ListVolumesRequest) (*podsyncv1.ListVolumesResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.ListVolumes(ctx, req)
}

func (l *lateService) DeleteVolume(ctx context.Context, req *podsyncv1.DeleteVolumeRequest) (*podsyncv1.DeleteVolumeResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.DeleteVolume(ctx, req)
}

func (l *lateService) ApplyObjects(ctx context.Context, req *podsyncv1.ApplyObjectsRequest) (*podsyncv1.ApplyObjectsResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.ApplyObjects(ctx, req)
}

func (l *lateService) GetObject(ctx context.Context, req *podsyncv1.GetObjectRequest) (*podsyncv1.GetObjectResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.GetObject(ctx, req)
}

func (l *lateService) ListObjects(ctx context.Context, req *podsyncv1.ListObjectsRequest) (*podsyncv1.ListObjectsResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.ListObjects(ctx, req)
}

func (l *lateService) DeleteObject(ctx context.Context, req *podsyncv1.DeleteObjectRequest) (*podsyncv1.DeleteObjectResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.DeleteObject(ctx, req)
}

func (l *lateService) WatchObjects(req *podsyncv1.WatchObjectsRequest, s grpc.ServerStreamingServer[podsyncv1.WatchObjectsResponse]) error {
	svc, err := l.get()
	if err != nil {
		return err
	}
	return svc.WatchObjects(req, s)
}

func (l *lateService) ExecSync(ctx context.Context, req *podsyncv1.ExecSyncRequest) (*podsyncv1.ExecSyncResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.ExecSync(ctx, req)
}

func (l *lateService) Exec(s grpc.BidiStreamingServer[podsyncv1.ExecRequest, podsyncv1.ExecResponse]) error {
	svc, err := l.get()
	if err != nil {
		return err
	}
	return svc.Exec(s)
}

func (l *lateService) Attach(s grpc.BidiStreamingServer[podsyncv1.AttachRequest, podsyncv1.AttachResponse]) error {
	svc, err := l.get()
	if err != nil {
		return err
	}
	return svc.Attach(s)
}

func (l *lateService) PortForward(s grpc.BidiStreamingServer[podsyncv1.PortForwardRequest, podsyncv1.PortForwardResponse]) error {
	svc, err := l.get()
	if err != nil {
		return err
	}
	return svc.PortForward(s)
}

func (l *lateService) GetPodStats(ctx context.Context, req *podsyncv1.GetPodStatsRequest) (*podsyncv1.GetPodStatsResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.GetPodStats(ctx, req)
}

func (l *lateService) ListPodStats(ctx context.Context, req *podsyncv1.ListPodStatsRequest) (*podsyncv1.ListPodStatsResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.ListPodStats(ctx, req)
}

func (l *lateService) CreateVolume(ctx context.Context, req *podsyncv1.CreateVolumeRequest) (*podsyncv1.CreateVolumeResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.CreateVolume(ctx, req)
}

func (l *lateService) AddEphemeralContainer(ctx context.Context, req *podsyncv1.AddEphemeralContainerRequest) (*podsyncv1.AddEphemeralContainerResponse, error) {
	svc, err := l.get()
	if err != nil {
		return nil, err
	}
	return svc.AddEphemeralContainer(ctx, req)
}
