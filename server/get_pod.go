package server

import (
	"context"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// GetPod returns one stored pod with its current status.
func (s *service) GetPod(ctx context.Context, req *podsyncv1.GetPodRequest) (*podsyncv1.GetPodResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if err := InvalidRequest(s.validator.ValidateGetPodRequest(req)); err != nil {
		return nil, err
	}
	rec, err := s.node.Get(ctx, orDefaultNamespace(req.GetNamespace()), req.GetName())
	if err != nil {
		return nil, err
	}
	return &podsyncv1.GetPodResponse{Pod: s.recordToProto(rec), Revision: rec.ModRevision}, nil
}
