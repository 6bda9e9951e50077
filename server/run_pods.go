package server

import (
	"google.golang.org/grpc"
	"time"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// RunPods admits, applies and waits for a batch of pods, streaming their
// steps and statuses, then the summary. A client that goes away ends the
// stream, never the pods.
func (s *service) RunPods(req *podsyncv1.RunPodsRequest, stream grpc.ServerStreamingServer[podsyncv1.RunPodsResponse]) error {
	pods, configMaps, secrets, err := s.validator.PodsFromRequest(req)
	if err != nil {
		return err
	}
	r := engine.RunPodsRequest{
		Pods:         pods,
		ConfigMaps:   configMaps,
		Secrets:      secrets,
		WaitFor:      waitForFromProto(req.GetWaitFor()),
		Timeout:      engine.DefaultRunPodsTimeout,
		AllOrNothing: req.GetAdmissionMode() == podsyncv1.AdmissionMode_ADMISSION_MODE_ALL_OR_NOTHING,
	}
	if t := req.GetTimeout(); t != nil {
		r.Timeout = t.AsDuration()
	}
	r.MinReady = time.Duration(req.GetMinReadySeconds()) * time.Second
	ctx := stream.Context()
	node := s.backend(ctx).Pods
	out := newStreamSender(stream)
	sum, err := node.RunPods(ctx, r, func(p engine.RunPodsProgress) {
		if ctx.Err() != nil {
			return
		}
		if m := s.progressToProto(node, p); m != nil {
			_ = out.send(m)
		}
	})
	if err != nil {
		return err
	}
	return out.send(&podsyncv1.RunPodsResponse{Event: &podsyncv1.RunPodsResponse_Summary{Summary: s.summaryToProto(node, sum)}})
}

func waitForFromProto(w podsyncv1.WaitFor) engine.WaitFor {
	switch w {
	case podsyncv1.WaitFor_WAIT_FOR_READY:
		return engine.WaitForReady
	case podsyncv1.WaitFor_WAIT_FOR_SUCCEEDED:
		return engine.WaitForSucceeded
	}
	return engine.WaitForRunning
}
