package server

import (
	"context"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/validation"
)

// The roles the service consumes of the node, each as narrow as its RPCs
// need (etcd's v3rpc servers hold one such interface per service). The
// engine's facade satisfies them: *engine.Node is Pods, Objects and Node;
// its Sessions(), Stats(), Logs() and Volumes() are the others.

// Pods are the node's pods.
type Pods interface {
	// ApplyIf stores pod as desired under pre and the fence of ctx, and
	// runs one pass of it (SyncPod).
	ApplyIf(ctx context.Context, pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret, pre engine.Precondition, emit func(engine.StepResult)) (engine.ApplyResult, error)
	// Plan says what a pass of pod would do now (PlanPod).
	Plan(ctx context.Context, pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret) (engine.PodActions, corev1.PodStatus, bool, error)
	// RunPods runs a batch of pods to a target (RunPods).
	RunPods(ctx context.Context, req engine.RunPodsRequest, progress func(engine.RunPodsProgress)) (engine.RunPodsSummary, error)
	// Get returns a stored pod, a copy the caller may change.
	Get(ctx context.Context, namespace, name string) (*engine.PodRecord, error)
	// GetShared returns a stored pod, shared: it must not be changed.
	GetShared(ctx context.Context, namespace, name string) (*engine.PodRecord, error)
	// ListShared returns the stored pods f selects, shared, and the
	// revision of the snapshot.
	ListShared(ctx context.Context, f engine.PodFilter) ([]*engine.PodRecord, int64, error)
	// Watch follows the revision log from after since.
	Watch(ctx context.Context, since int64) (*engine.Watcher, error)
	// DeleteIf deletes a pod under pre and the fence of ctx (DeletePod).
	DeleteIf(ctx context.Context, namespace, name string, pre engine.Precondition, grace *int64) (engine.DeleteResult, error)
	// Events lists the pods' events, one per series (ListEvents).
	Events(ctx context.Context, f engine.EventFilter) ([]engine.Entry, int64, error)
	// AddEphemeralContainer adds a debug container to a running pod.
	AddEphemeralContainer(ctx context.Context, namespace, name string, ec corev1.EphemeralContainer, pre engine.Precondition, opts validation.Options) (engine.ApplyResult, error)
	// PodSandbox returns the sandbox the pod's containers ran in after its
	// last pass.
	PodSandbox(uid types.UID) (id string, attempt uint32, ok bool)
}

// Objects are the node's stored ConfigMaps and Secrets.
type Objects interface {
	ApplyObjects(ctx context.Context, objs []engine.ObjectPut, source string) ([]engine.ObjectResult, error)
	GetObject(ctx context.Context, ref engine.ObjectRef) (*engine.ObjectRecord, error)
	ListObjects(ctx context.Context, f engine.ObjectFilter) ([]*engine.ObjectRecord, int64, error)
	DeleteObject(ctx context.Context, ref engine.ObjectRef, resourceVersion, source string) (found bool, rev int64, err error)
	// Watch follows the revision log from after since (WatchObjects).
	Watch(ctx context.Context, since int64) (*engine.Watcher, error)
}

// Sessions run commands in containers and stream to and from them.
type Sessions interface {
	ExecSync(ctx context.Context, ref engine.ContainerRef, cmd []string, timeout time.Duration) (engine.ExecSyncResult, error)
	Exec(ctx context.Context, ref engine.ContainerRef, cmd []string, o engine.StreamOptions) (int, error)
	Attach(ctx context.Context, ref engine.ContainerRef, o engine.StreamOptions) (int, error)
	PortForward(ctx context.Context, namespace, name string, port int32, in io.Reader, out io.Writer, idleTimeout time.Duration) error
}

// Logs read the containers' output.
type Logs interface {
	ContainerLogs(ctx context.Context, req engine.LogsRequest, emit func(engine.LogLine) error) error
}

// Stats read the node's and the pods' usage.
type Stats interface {
	PodStats(ctx context.Context, namespace, name string) (engine.PodStats, error)
	Summary(ctx context.Context, namespace string) (engine.StatsSummary, error)
}

// Volumes are the node's named volumes.
type Volumes interface {
	List(ctx context.Context) ([]engine.NamedVolume, error)
	Create(ctx context.Context, namespace, name string, mustNotExist bool) (bool, error)
	Delete(ctx context.Context, namespace, name string) (bool, error)
}

// Node is what the node says of itself (GetNode).
type Node interface {
	// Info is what admission knows of the node and what it says of its
	// machine.
	Info() engine.NodeInfo
}

// Leases are the node's lease (AcquireLease, RenewLease, ReleaseLease,
// GetNode).
type Leases interface {
	Get(ctx context.Context) (engine.Lease, error)
	Acquire(ctx context.Context, holder string, ttl time.Duration) (engine.Lease, error)
	Renew(ctx context.Context, holder string, epoch int64, ttl time.Duration) (engine.Lease, error)
	Release(ctx context.Context, holder string, epoch int64) (bool, error)
}

// Backend is the node a service answers for, by role. Every role is
// required.
type Backend struct {
	Pods     Pods
	Objects  Objects
	Sessions Sessions
	Logs     Logs
	Stats    Stats
	Volumes  Volumes
	Node     Node
	Leases   Leases
}

// BackendOf returns the Backend of the engine's node.
func BackendOf(n *engine.Node) *Backend {
	return &Backend{Pods: n, Objects: n, Sessions: n.Sessions(), Logs: n.Logs(), Stats: n.Stats(), Volumes: n.Volumes(), Node: n,
		Leases: n.Leases()}
}

var (
	_ Pods    = (*engine.Node)(nil)
	_ Objects = (*engine.Node)(nil)
	_ Node    = (*engine.Node)(nil)
)

// backendKey is the context key of the backend a call is served by.
type backendKey struct{}

// backend returns the backend the readiness gate gave the call, or, for
// a call that did not pass the gate (a test calling a handler), the
// current one.
func (s *service) backend(ctx context.Context) *Backend {
	if b, ok := ctx.Value(backendKey{}).(*Backend); ok {
		return b
	}
	return s.cur.Load()
}

// ready returns the backend to serve a call with, or, while there is none
// or the runtime has not answered yet, UNAVAILABLE with reason
// RUNTIME_UNAVAILABLE. It is the one readiness check of the service,
// made once per call by its interceptors (containerd's CRI plugin checks
// once so, in its instrumented service).
func (s *service) ready() (*Backend, error) {
	b := s.cur.Load()
	if b == nil {
		return nil, NewError(codes.Unavailable, errorinfo.ReasonRuntimeUnavailable,
			"podsyncd is not connected to the container runtime yet; retry", nil)
	}
	if s.health != nil {
		if err := s.health.CheckReady(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// ownsMethod reports whether fullMethod is one of the service's RPCs.
func ownsMethod(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/"+podsyncv1.PodSyncService_ServiceDesc.ServiceName+"/")
}

// UnaryReady is the service's readiness gate for unary calls: a call is
// served by the backend current when it arrives, or refused with
// UNAVAILABLE before the node runs; a mutating call gets its lease
// condition (withFence). Calls of other services pass.
func (s *service) UnaryReady() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !ownsMethod(info.FullMethod) {
			return handler(ctx, req)
		}
		b, err := s.ready()
		if err != nil {
			return nil, err
		}
		if ctx, err = s.withFence(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(context.WithValue(ctx, backendKey{}, b), req)
	}
}

// StreamReady is UnaryReady for streams.
func (s *service) StreamReady() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !ownsMethod(info.FullMethod) {
			return handler(srv, ss)
		}
		b, err := s.ready()
		if err != nil {
			return err
		}
		ctx, err := s.withFence(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &backendStream{ServerStream: ss, ctx: context.WithValue(ctx, backendKey{}, b)})
	}
}

// backendStream is a stream whose context holds its backend.
type backendStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *backendStream) Context() context.Context { return s.ctx }
