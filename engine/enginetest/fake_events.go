package enginetest

import (
	"context"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// eventBuffer is how many events a slow GetContainerEvents caller may fall
// behind before events are dropped for it (see DroppedEvents).
const eventBuffer = 1024

// subscriber is one GetContainerEvents caller.
type subscriber struct {
	ch chan *runtimeapi.ContainerEventResponse
}

// emit sends an event about c to every subscriber without blocking; the
// caller holds the embedded service's lock.
func (r *FakeRuntime) emit(c *critest.FakeContainer, typ runtimeapi.ContainerEventType) {
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        c.Id,
		ContainerEventType: typ,
		CreatedAt:          r.now(),
		ContainersStatuses: []*runtimeapi.ContainerStatus{proto.Clone(&c.ContainerStatus).(*runtimeapi.ContainerStatus)},
	}
	if s, ok := r.Sandboxes[c.SandboxID]; ok {
		ev.PodSandboxStatus = proto.Clone(&s.PodSandboxStatus).(*runtimeapi.PodSandboxStatus)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range r.subs {
		select {
		case s.ch <- ev:
		default:
			r.dropped++
		}
	}
}

// DroppedEvents returns how many events were dropped because a
// GetContainerEvents caller fell more than 1024 events behind.
func (r *FakeRuntime) DroppedEvents() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// GetContainerEvents streams container events into containerEventsCh until
// ctx is done, and then returns ctx's error as a gRPC status, as
// k8s.io/cri-client does. connectionEstablishedCallback, if set, is called
// once the subscription is in place, with a stream whose only usable method
// is Context.
func (r *FakeRuntime) GetContainerEvents(ctx context.Context, containerEventsCh chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	r.Lock()
	err := r.enter("GetContainerEvents")
	r.Unlock()
	if err != nil {
		return err
	}
	sub := &subscriber{ch: make(chan *runtimeapi.ContainerEventResponse, eventBuffer)}
	r.mu.Lock()
	r.subs[sub] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.subs, sub)
		r.mu.Unlock()
	}()
	if connectionEstablishedCallback != nil {
		connectionEstablishedCallback(&eventStream{ctx: ctx})
	}
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case ev := <-sub.ch:
			select {
			case containerEventsCh <- ev:
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
	}
}

// eventStream is the stream handed to GetContainerEvents' callback. Only
// Context works; the embedded nil interface makes other methods panic.
type eventStream struct {
	runtimeapi.RuntimeService_GetContainerEventsClient
	ctx context.Context
}

// Context returns the context of the GetContainerEvents call.
func (s *eventStream) Context() context.Context { return s.ctx }
