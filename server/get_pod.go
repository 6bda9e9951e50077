package server

import (
	"context"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// GetPod returns one stored pod with its current status.
func (s *service) GetPod(ctx context.Context, req *podsyncv1.GetPodRequest) (*podsyncv1.GetPodResponse, error) {
	if err := InvalidRequest(s.validator.ValidateGetPodRequest(req)); err != nil {
		return nil, err
	}
	// The record is only read; the store's shared one lets recordToProto
	// reuse the message it made of it before.
	rec, err := s.backend(ctx).Pods.GetShared(ctx, orDefaultNamespace(req.GetNamespace()), req.GetName())
	if err != nil {
		return nil, err
	}
	return &podsyncv1.GetPodResponse{Pod: s.recordToProto(s.backend(ctx).Pods, rec), Revision: rec.ModRevision}, nil
}
