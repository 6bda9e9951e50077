package server

import (
	"context"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// DeleteObject removes a stored ConfigMap or Secret; an unknown one is
// found = false.
func (s *service) DeleteObject(ctx context.Context, req *podsyncv1.DeleteObjectRequest) (*podsyncv1.DeleteObjectResponse, error) {
	if err := InvalidRequest(s.validator.ValidateDeleteObjectRequest(req)); err != nil {
		return nil, err
	}
	ref := engine.ObjectRef{Kind: objectKindFromProto(req.GetKind()), Namespace: orDefaultNamespace(req.GetNamespace()), Name: req.GetName()}
	found, rev, err := s.backend(ctx).Objects.DeleteObject(ctx, ref, req.GetResourceVersion(), "")
	if err != nil {
		return nil, err
	}
	return &podsyncv1.DeleteObjectResponse{Found: found, Revision: rev}, nil
}
