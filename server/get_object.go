package server

import (
	"context"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// GetObject returns one stored ConfigMap or Secret, a Secret's values
// removed.
func (s *service) GetObject(ctx context.Context, req *podsyncv1.GetObjectRequest) (*podsyncv1.GetObjectResponse, error) {
	if err := InvalidRequest(s.validator.ValidateGetObjectRequest(req)); err != nil {
		return nil, err
	}
	ref := engine.ObjectRef{Kind: objectKindFromProto(req.GetKind()), Namespace: orDefaultNamespace(req.GetNamespace()), Name: req.GetName()}
	rec, err := s.backend(ctx).Objects.GetObject(ctx, ref)
	if err != nil {
		return nil, err
	}
	obj, err := objectToProto(rec)
	if err != nil {
		return nil, err
	}
	return &podsyncv1.GetObjectResponse{Object: obj}, nil
}
