package server

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/errdefs"
)

// DeletePod stops and removes a pod; an unknown pod is found = false.
func (s *service) DeletePod(ctx context.Context, req *podsyncv1.DeletePodRequest) (*podsyncv1.DeletePodResponse, error) {
	if err := InvalidRequest(s.validator.ValidateDeletePodRequest(req)); err != nil {
		return nil, err
	}
	pre, errs := preconditionFromProto(field.NewPath("precondition"), req.GetPrecondition())
	if uid := types.UID(req.GetUid()); uid != "" {
		if pre.UID != "" && pre.UID != uid {
			errs = append(errs, field.Invalid(field.NewPath("precondition", "uid"), pre.UID, "differs from uid: set one of them"))
		}
		pre.UID = uid
	}
	if err := InvalidRequest(errs); err != nil {
		return nil, err
	}
	ns, name := orDefaultNamespace(req.GetNamespace()), req.GetName()
	// Only read: the shared record spares a copy of the pod.
	rec, err := s.backend(ctx).Pods.GetShared(ctx, ns, name)
	switch {
	case errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrPodNotFound):
		return &podsyncv1.DeletePodResponse{Found: false}, nil
	case err != nil:
		return nil, err
	}
	ref := engine.RefOf(rec.Pod)
	res, err := s.backend(ctx).Pods.DeleteIf(ctx, ns, name, pre, req.GracePeriodSeconds)
	if err != nil {
		return nil, err
	}
	resp := &podsyncv1.DeletePodResponse{Found: res.Found, Steps: stepsToProto(res.Steps)}
	if res.Found {
		resp.Pod = podRefToProto(ref)
		resp.Status = s.statusToProto(&res.Status, res.Steps, sandboxRef{})
	}
	return resp, nil
}
