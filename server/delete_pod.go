package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/errorinfo"
)

// DeletePod stops and removes a pod; an unknown pod is found = false.
func (s *service) DeletePod(ctx context.Context, req *podsyncv1.DeletePodRequest) (*podsyncv1.DeletePodResponse, error) {
	if err := InvalidRequest(s.validator.ValidateDeletePodRequest(req)); err != nil {
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
	if uid := req.GetUid(); uid != "" && uid != string(ref.UID) {
		return nil, NewError(codes.FailedPrecondition, errorinfo.ReasonUIDMismatch,
			fmt.Sprintf("pod %s/%s has uid %s, not %s", ns, name, ref.UID, uid),
			map[string]string{errorinfo.MetadataUID: string(ref.UID)})
	}
	res, err := s.backend(ctx).Pods.Delete(ctx, ns, name, string(ref.UID), req.GracePeriodSeconds)
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
