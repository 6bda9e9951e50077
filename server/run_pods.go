package server

import (
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	if r.Preconditions, err = runPreconditions(req.GetPreconditions(), pods); err != nil {
		return err
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

// runPreconditions returns the preconditions of a batch by pod UID: each
// must name one pod of the batch, once.
func runPreconditions(in []*podsyncv1.PodPrecondition, pods []*corev1.Pod) (map[types.UID]engine.Precondition, error) {
	if len(in) == 0 {
		return nil, nil
	}
	byName := make(map[string]types.UID, len(pods))
	for _, p := range pods {
		byName[p.Namespace+"/"+p.Name] = p.UID
	}
	out := make(map[types.UID]engine.Precondition, len(in))
	var errs field.ErrorList
	for i, pp := range in {
		path := field.NewPath("preconditions").Index(i)
		uid, ok := byName[orDefaultNamespace(pp.GetNamespace())+"/"+pp.GetName()]
		if !ok {
			errs = append(errs, field.NotFound(path.Child("name"), pp.GetName()))
			continue
		}
		if _, dup := out[uid]; dup {
			errs = append(errs, field.Duplicate(path.Child("name"), pp.GetName()))
			continue
		}
		pre, perrs := preconditionFromProto(path.Child("precondition"), pp.GetPrecondition())
		errs = append(errs, perrs...)
		out[uid] = pre
	}
	return out, InvalidRequest(errs)
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
