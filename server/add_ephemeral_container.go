package server

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/logx"
	"go.uber.org/zap"
)

// AddEphemeralContainer adds a debug container to a running pod and runs
// the pass that starts it.
func (s *service) AddEphemeralContainer(ctx context.Context, req *podsyncv1.AddEphemeralContainerRequest) (*podsyncv1.AddEphemeralContainerResponse, error) {
	ec, opts, errs := s.validator.ValidateAddEphemeralContainerRequest(req)
	if err := InvalidRequest(errs); err != nil {
		return nil, err
	}
	pre, perrs := preconditionFromProto(field.NewPath("precondition"), req.GetPrecondition())
	if err := InvalidRequest(perrs); err != nil {
		return nil, err
	}
	ns := orDefaultNamespace(req.GetNamespace())
	res, err := s.backend(ctx).Pods.AddEphemeralContainer(ctx, ns, req.GetName(), ec, pre, opts)
	if err != nil {
		return nil, err
	}
	logx.From(ctx, s.log).Info("ephemeral container added", zap.String(logx.PodNamespace, ns), zap.String(logx.PodName, req.GetName()),
		zap.String(logx.ContainerName, ec.Name), zap.String(logx.Image, ec.Image), zap.Strings("command", ec.Command))
	rec, err := s.backend(ctx).Pods.Get(ctx, ns, req.GetName())
	if err != nil {
		return nil, err
	}
	// Not through the pod cache: the status is replaced by the pass's.
	sb := s.currentSandbox(s.backend(ctx).Pods, rec.Pod.UID)
	pod := s.podToProto(rec, sb)
	pod.Status = s.statusToProto(&res.Status, res.Steps, sb)
	return &podsyncv1.AddEphemeralContainerResponse{Pod: pod}, nil
}
