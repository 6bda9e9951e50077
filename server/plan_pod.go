package server

import (
	"context"
	"time"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// PlanPod says what a SyncPod of the pod would do now, without doing it
// and without storing the pod.
func (s *service) PlanPod(ctx context.Context, req *podsyncv1.PlanPodRequest) (*podsyncv1.PlanPodResponse, error) {
	pods, configMaps, secrets, err := s.validator.PodsFromRequest(req)
	if err != nil {
		return nil, err
	}
	if len(pods) != 1 {
		return nil, errNoPod
	}
	pod := pods[0]
	plan, st, known, err := s.backend(ctx).Pods.Plan(ctx, pod, configMaps, secrets)
	if err != nil {
		return nil, err
	}
	return &podsyncv1.PlanPodResponse{
		Pod:    podRefToProto(engine.RefOf(pod)),
		Plan:   planToProto(pod, plan, time.Now()),
		Status: s.statusToProto(&st, nil, s.currentSandbox(s.backend(ctx).Pods, pod.UID)),
		Known:  known,
	}, nil
}
