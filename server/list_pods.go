package server

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// ListPods returns the stored pods a filter selects, ordered by namespace
// and name, with the revision to watch from.
func (s *service) ListPods(ctx context.Context, req *podsyncv1.ListPodsRequest) (*podsyncv1.ListPodsResponse, error) {
	if err := InvalidRequest(s.validator.ValidateListPodsRequest(req)); err != nil {
		return nil, err
	}
	f, err := filterOf(req.GetNamespace(), req.GetLabelSelector())
	if err != nil {
		return nil, err
	}
	for _, ph := range req.GetPhases() {
		f.Phases = append(f.Phases, corev1.PodPhase(ph))
	}
	recs, rev, err := s.backend(ctx).Pods.ListShared(ctx, f)
	if err != nil {
		return nil, err
	}
	out := &podsyncv1.ListPodsResponse{Revision: rev, Pods: make([]*podsyncv1.Pod, 0, len(recs))}
	for _, rec := range recs {
		out.Pods = append(out.Pods, s.recordToProto(s.backend(ctx).Pods, rec))
	}
	return out, nil
}

// filterOf builds a store filter of a namespace (all when empty) and a
// label selector in Kubernetes syntax (all when empty).
func filterOf(namespace, selector string) (engine.PodFilter, error) {
	f := engine.PodFilter{Namespace: namespace}
	if selector != "" {
		sel, err := labels.Parse(selector)
		if err != nil {
			return f, InvalidRequest(field.ErrorList{field.Invalid(field.NewPath("labelSelector"), selector, err.Error())})
		}
		f.Selector = sel
	}
	return f, nil
}
