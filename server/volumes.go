package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
)

// ListVolumes returns the node's named volumes.
func (s *service) ListVolumes(ctx context.Context, _ *podsyncv1.ListVolumesRequest) (*podsyncv1.ListVolumesResponse, error) {
	vols, err := s.backend(ctx).Volumes.List(ctx)
	if err != nil {
		return nil, err
	}
	out := &podsyncv1.ListVolumesResponse{}
	for _, v := range vols {
		out.Volumes = append(out.Volumes, &podsyncv1.NamedVolume{Namespace: v.Namespace, Name: v.Name, Path: v.Path, Pods: v.Pods})
	}
	return out, nil
}

// CreateVolume creates a named volume, as a pod naming the claim would.
func (s *service) CreateVolume(ctx context.Context, req *podsyncv1.CreateVolumeRequest) (*podsyncv1.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, NewError(codes.InvalidArgument, errorinfo.ReasonInvalidSpec, "name: required: the volume's claimName", nil)
	}
	mustNotExist := false
	if p := req.GetPrecondition(); p != nil {
		if p.Revision == nil || p.GetRevision() != 0 || p.GetUid() != "" {
			return nil, NewError(codes.InvalidArgument, errorinfo.ReasonInvalidSpec,
				"precondition: volumes have no revisions or uids: only revision 0 (the volume must not exist) applies", nil)
		}
		mustNotExist = true
	}
	created, err := s.backend(ctx).Volumes.Create(ctx, volumeNamespace(req.GetNamespace()), req.GetName(), mustNotExist)
	if err != nil {
		return nil, err
	}
	return &podsyncv1.CreateVolumeResponse{Created: created}, nil
}

// volumeNamespace is a volume request's namespace: "default" when empty,
// as a PersistentVolumeClaim's.
func volumeNamespace(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// DeleteVolume removes a named volume no stored pod names.
func (s *service) DeleteVolume(ctx context.Context, req *podsyncv1.DeleteVolumeRequest) (*podsyncv1.DeleteVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, NewError(codes.InvalidArgument, errorinfo.ReasonInvalidSpec, fmt.Sprintf("name: required: the volume's claimName (%s)", "podsyncctl volume ls lists them"), nil)
	}
	found, err := s.backend(ctx).Volumes.Delete(ctx, volumeNamespace(req.GetNamespace()), req.GetName())
	if err != nil {
		return nil, err
	}
	return &podsyncv1.DeleteVolumeResponse{Found: found}, nil
}
