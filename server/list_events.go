package server

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// ListEvents returns the pods' events the revision log still holds, one
// per series (its newest occurrence), oldest first.
func (s *service) ListEvents(ctx context.Context, req *podsyncv1.ListEventsRequest) (*podsyncv1.ListEventsResponse, error) {
	if err := InvalidRequest(s.validator.ValidateListEventsRequest(req)); err != nil {
		return nil, err
	}
	f := engine.EventFilter{Namespace: req.GetNamespace(), Name: req.GetPodName(), UID: types.UID(req.GetPodUid())}
	entries, rev, err := s.backend(ctx).Pods.Events(ctx, f)
	if err != nil {
		return nil, err
	}
	out := &podsyncv1.ListEventsResponse{Revision: rev, Events: make([]*podsyncv1.ListedEvent, 0, len(entries))}
	for _, e := range entries {
		out.Events = append(out.Events, &podsyncv1.ListedEvent{Pod: podRefToProto(e.Pod), Event: eventToProto(e.Event), Revision: e.Revision})
	}
	return out, nil
}
