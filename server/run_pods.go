package server

import (
	"google.golang.org/grpc"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/runpods"
)

// RunPods admits, applies and waits for a batch of pods, streaming their
// steps and statuses, then the summary. A client that goes away ends the
// stream, never the pods.
func (s *service) RunPods(req *podsyncv1.RunPodsRequest, stream grpc.ServerStreamingServer[podsyncv1.RunPodsResponse]) error {
	if err := s.ready(); err != nil {
		return err
	}
	pods, configMaps, secrets, err := s.validator.PodsFromRequest(req)
	if err != nil {
		return err
	}
	r := runpods.Request{
		Pods:         pods,
		ConfigMaps:   configMaps,
		Secrets:      secrets,
		WaitFor:      waitForFromProto(req.GetWaitFor()),
		Timeout:      runpods.DefaultTimeout,
		AllOrNothing: req.GetAdmissionMode() == podsyncv1.AdmissionMode_ADMISSION_MODE_ALL_OR_NOTHING,
	}
	if t := req.GetTimeout(); t != nil {
		r.Timeout = t.AsDuration()
	}
	ctx := stream.Context()
	opts := s.runPods
	opts.Logger = ContextLogger(ctx)
	out := newStreamSender(stream)
	sum, err := runpods.Run(ctx, opts, r, func(p runpods.Progress) {
		if ctx.Err() != nil {
			return
		}
		if m := s.progressToProto(p); m != nil {
			_ = out.send(m)
		}
	})
	if err != nil {
		return err
	}
	return out.send(&podsyncv1.RunPodsResponse{Event: &podsyncv1.RunPodsResponse_Summary{Summary: s.summaryToProto(sum)}})
}

func waitForFromProto(w podsyncv1.WaitFor) runpods.WaitFor {
	switch w {
	case podsyncv1.WaitFor_WAIT_FOR_READY:
		return runpods.Ready
	case podsyncv1.WaitFor_WAIT_FOR_SUCCEEDED:
		return runpods.Succeeded
	}
	return runpods.Running
}
