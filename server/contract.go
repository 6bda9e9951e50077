package server

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/errorinfo"
)

// LeaseEpochHeader is the request metadata key of the lease epoch a
// mutating call carries (podsync.v1.Lease).
const LeaseEpochHeader = "podsync-lease-epoch"

// Bounds of a lease's ttl.
const (
	MinLeaseTTL = time.Second
	MaxLeaseTTL = time.Hour
)

// fencedMethods are the mutating RPCs a lease fences: those that change
// what the node runs or stores. Sessions into pods (exec, attach,
// port-forward) and the lease's own RPCs are not fenced.
var fencedMethods = map[string]bool{
	podsyncv1.PodSyncService_SyncPod_FullMethodName:               true,
	podsyncv1.PodSyncService_RunPods_FullMethodName:               true,
	podsyncv1.PodSyncService_DeletePod_FullMethodName:             true,
	podsyncv1.PodSyncService_AddEphemeralContainer_FullMethodName: true,
	podsyncv1.PodSyncService_ApplyObjects_FullMethodName:          true,
	podsyncv1.PodSyncService_DeleteObject_FullMethodName:          true,
	podsyncv1.PodSyncService_CreateVolume_FullMethodName:          true,
	podsyncv1.PodSyncService_DeleteVolume_FullMethodName:          true,
}

// withFence returns ctx with the lease condition of a fenced method's
// writes (engine.WithFence): the epoch of the call's LeaseEpochHeader, and
// whether the node requires one. A malformed epoch is INVALID_ARGUMENT.
func (s *service) withFence(ctx context.Context, fullMethod string) (context.Context, error) {
	if !fencedMethods[fullMethod] {
		return ctx, nil
	}
	var epoch int64
	if vals := metadata.ValueFromIncomingContext(ctx, LeaseEpochHeader); len(vals) > 0 {
		e, err := strconv.ParseInt(vals[len(vals)-1], 10, 64)
		if err != nil || e < 1 {
			return nil, NewError(codes.InvalidArgument, errorinfo.ReasonInvalidSpec,
				fmt.Sprintf("metadata %s: %q is not a lease epoch (a positive integer, AcquireLease's)", LeaseEpochHeader, vals[len(vals)-1]), nil)
		}
		epoch = e
	}
	return engine.WithFence(ctx, engine.Fence{Epoch: epoch, Require: s.requireLease}), nil
}

// preconditionFromProto returns the engine's precondition of p at path;
// a negative revision is a violation.
func preconditionFromProto(path *field.Path, p *podsyncv1.Precondition) (engine.Precondition, field.ErrorList) {
	var out engine.Precondition
	if p == nil {
		return out, nil
	}
	if p.Revision != nil {
		if p.GetRevision() < 0 {
			return out, field.ErrorList{field.Invalid(path.Child("revision"), p.GetRevision(), "a revision is 0 (does not exist) or positive")}
		}
		r := p.GetRevision()
		out.Revision = &r
	}
	out.UID = types.UID(p.GetUid())
	return out, nil
}

// AcquireLease makes the caller the holder of the node's lease.
func (s *service) AcquireLease(ctx context.Context, req *podsyncv1.AcquireLeaseRequest) (*podsyncv1.AcquireLeaseResponse, error) {
	ttl, err := leaseTTL(req.GetTtl(), true)
	if err != nil {
		return nil, err
	}
	l, err := s.backend(ctx).Leases.Acquire(ctx, holderOf(ctx), ttl)
	if err != nil {
		return nil, err
	}
	return &podsyncv1.AcquireLeaseResponse{Lease: leaseToProto(l)}, nil
}

// RenewLease extends the caller's lease.
func (s *service) RenewLease(ctx context.Context, req *podsyncv1.RenewLeaseRequest) (*podsyncv1.RenewLeaseResponse, error) {
	if req.GetEpoch() < 1 {
		return nil, NewError(codes.InvalidArgument, errorinfo.ReasonInvalidSpec, "epoch: required: the lease's epoch (AcquireLease's)", nil)
	}
	ttl, err := leaseTTL(req.GetTtl(), false)
	if err != nil {
		return nil, err
	}
	l, err := s.backend(ctx).Leases.Renew(ctx, holderOf(ctx), req.GetEpoch(), ttl)
	if err != nil {
		return nil, err
	}
	return &podsyncv1.RenewLeaseResponse{Lease: leaseToProto(l)}, nil
}

// ReleaseLease gives the caller's lease up.
func (s *service) ReleaseLease(ctx context.Context, req *podsyncv1.ReleaseLeaseRequest) (*podsyncv1.ReleaseLeaseResponse, error) {
	if req.GetEpoch() < 1 {
		return nil, NewError(codes.InvalidArgument, errorinfo.ReasonInvalidSpec, "epoch: required: the lease's epoch (AcquireLease's)", nil)
	}
	released, err := s.backend(ctx).Leases.Release(ctx, holderOf(ctx), req.GetEpoch())
	if err != nil {
		return nil, err
	}
	return &podsyncv1.ReleaseLeaseResponse{Released: released}, nil
}

// holderOf is the caller's identity as a lease's holder.
func holderOf(ctx context.Context) string {
	id, _ := IdentityFromContext(ctx)
	return id.String()
}

// leaseTTL checks a request's ttl: required or not, within the bounds.
func leaseTTL(d *durationpb.Duration, required bool) (time.Duration, error) {
	if d == nil {
		if required {
			return 0, NewError(codes.InvalidArgument, errorinfo.ReasonInvalidSpec, "ttl: required: how long the lease lasts without a renewal", nil)
		}
		return 0, nil
	}
	ttl := d.AsDuration()
	if !d.IsValid() || ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return 0, NewError(codes.InvalidArgument, errorinfo.ReasonInvalidSpec,
			fmt.Sprintf("ttl: %s is out of range: a lease lasts %s to %s", ttl, MinLeaseTTL, MaxLeaseTTL), nil)
	}
	return ttl, nil
}

// leaseToProto translates the node's lease; nil for one never acquired.
func leaseToProto(l engine.Lease) *podsyncv1.Lease {
	if l.Epoch == 0 {
		return nil
	}
	out := &podsyncv1.Lease{Holder: l.Holder, Epoch: l.Epoch}
	if l.Held() {
		out.Ttl = durationpb.New(l.TTL)
		out.AcquireTime = timestamppb.New(l.AcquiredAt)
		out.RenewTime = timestamppb.New(l.RenewedAt)
		out.ExpireTime = timestamppb.New(l.Expires())
	}
	return out
}
