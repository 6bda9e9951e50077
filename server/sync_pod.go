package server

import (
	"errors"
	"sync"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// errNoPod is returned if a validated request unexpectedly carries no pod.
var errNoPod = errors.New("request carries no pod")

// SyncPod stores the pod and runs one sync pass, streaming each step as
// the engine finishes it, then the result.
func (s *service) SyncPod(req *podsyncv1.SyncPodRequest, stream grpc.ServerStreamingServer[podsyncv1.SyncPodResponse]) error {
	pods, configMaps, secrets, err := s.validator.PodsFromRequest(req)
	if err != nil {
		return err
	}
	if len(pods) != 1 {
		return errNoPod
	}
	pre, errs := preconditionFromProto(field.NewPath("precondition"), req.GetPrecondition())
	if err := InvalidRequest(errs); err != nil {
		return err
	}
	pod := pods[0]
	ctx := stream.Context()
	out := newStreamSender(stream)
	res, err := s.backend(ctx).Pods.ApplyIf(ctx, pod, configMaps, secrets, pre, func(st engine.StepResult) {
		// A client that went away stops the sending, not the pass.
		if ctx.Err() == nil {
			_ = out.send(&podsyncv1.SyncPodResponse{Event: &podsyncv1.SyncPodResponse_Step{Step: stepToProto(st)}})
		}
	})
	if err != nil {
		return err
	}
	var rev int64
	if rec, err := s.backend(ctx).Pods.GetShared(ctx, pod.Namespace, pod.Name); err == nil && rec.Pod.UID == pod.UID {
		rev = rec.ModRevision
	}
	return out.send(&podsyncv1.SyncPodResponse{Event: &podsyncv1.SyncPodResponse_Result{Result: &podsyncv1.SyncPodResult{
		Pod:          podRefToProto(engine.RefOf(pod)),
		Status:       s.statusToProto(&res.Status, res.Steps, s.currentSandbox(s.backend(ctx).Pods, pod.UID)),
		Created:      res.Created,
		NextSyncTime: timeToProto(res.NextSync),
		Revision:     rev,
	}}})
}

// streamSender serializes the sends of a server stream and remembers the
// first error: after it, sends are dropped.
type streamSender[T any] struct {
	stream grpc.ServerStreamingServer[T]
	mu     sync.Mutex
	err    error
}

func newStreamSender[T any](stream grpc.ServerStreamingServer[T]) *streamSender[T] {
	return &streamSender[T]{stream: stream}
}

func (s *streamSender[T]) send(m *T) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = s.stream.Send(m)
	}
	return s.err
}
