package server

import (
	"context"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// ApplyObjects stores ConfigMaps and Secrets as objects of the node, in
// one transaction; the pods that use a changed one get a pass at once.
func (s *service) ApplyObjects(ctx context.Context, req *podsyncv1.ApplyObjectsRequest) (*podsyncv1.ApplyObjectsResponse, error) {
	cms, secrets, err := s.validator.ObjectsFromRequest(req)
	if err != nil {
		return nil, err
	}
	puts := make([]engine.ObjectPut, 0, len(cms)+len(secrets))
	for _, cm := range cms {
		puts = append(puts, engine.ObjectPut{ConfigMap: cm, ResourceVersion: cm.ResourceVersion})
	}
	for _, sec := range secrets {
		puts = append(puts, engine.ObjectPut{Secret: sec, ResourceVersion: sec.ResourceVersion})
	}
	res, err := s.backend(ctx).Objects.ApplyObjects(ctx, puts, "")
	if err != nil {
		return nil, err
	}
	out := &podsyncv1.ApplyObjectsResponse{Results: make([]*podsyncv1.ObjectResult, 0, len(res))}
	for _, r := range res {
		out.Results = append(out.Results, &podsyncv1.ObjectResult{
			Object: objectRefToProto(r.Record.Ref(), r.Record.ResourceVersion()), Created: r.Created, Changed: r.Changed,
		})
		out.Revision = max(out.Revision, r.Record.ModRevision)
	}
	return out, nil
}
