package server

import (
	"context"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// ListObjects returns the stored ConfigMaps and Secrets a filter selects,
// Secrets' values removed.
func (s *service) ListObjects(ctx context.Context, req *podsyncv1.ListObjectsRequest) (*podsyncv1.ListObjectsResponse, error) {
	if err := InvalidRequest(s.validator.ValidateListObjectsRequest(req)); err != nil {
		return nil, err
	}
	f, err := objectFilterOf(req.GetKind(), req.GetNamespace(), req.GetLabelSelector())
	if err != nil {
		return nil, err
	}
	recs, rev, err := s.backend(ctx).Objects.ListObjects(ctx, f)
	if err != nil {
		return nil, err
	}
	out := &podsyncv1.ListObjectsResponse{Objects: make([]*podsyncv1.Object, 0, len(recs)), Revision: rev}
	for _, rec := range recs {
		obj, err := objectToProto(rec)
		if err != nil {
			return nil, err
		}
		out.Objects = append(out.Objects, obj)
	}
	return out, nil
}

func objectFilterOf(kind podsyncv1.ObjectKind, namespace, selector string) (engine.ObjectFilter, error) {
	f := engine.ObjectFilter{Kind: objectKindFromProto(kind), Namespace: namespace}
	if selector != "" {
		sel, err := labels.Parse(selector)
		if err != nil {
			return f, InvalidRequest(field.ErrorList{field.Invalid(field.NewPath("labelSelector"), selector, err.Error())})
		}
		f.Selector = sel
	}
	return f, nil
}
