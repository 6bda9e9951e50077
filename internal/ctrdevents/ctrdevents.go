package ctrdevents

import (
	"context"
	"fmt"

	apievents "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/watch"
)

// Namespace is the containerd namespace of CRI's sandboxes and
// containers.
const Namespace = "k8s.io"

// Topics of the events a Source follows, with the CRI container event
// each stands for. A task's exit, delete and OOM all say that the
// container (or, for the sandbox's task, the sandbox) stopped or is
// stopping; the relist and the pass read what it became.
var Topics = map[string]runtimeapi.ContainerEventType{
	"/tasks/start":       runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
	"/tasks/exit":        runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
	"/tasks/delete":      runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
	"/tasks/oom":         runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
	"/containers/delete": runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT,
}

// Source is containerd's event service on one socket. It implements
// watch.RuntimeEvents. Build it with Dial and Close it when done.
type Source struct {
	conn   *grpc.ClientConn
	client eventsapi.EventsClient
	// filters select Topics in Namespace.
	filters []string
}

var _ watch.RuntimeEvents = (*Source)(nil)

// Dial returns a Source on containerd's socket at endpoint, the CRI
// endpoint ("unix:///run/containerd/containerd.sock"). It does not
// connect: Follow does, and fails while containerd is not there.
func Dial(endpoint string) (*Source, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("containerd event service at %s: %w", endpoint, err)
	}
	s := &Source{conn: conn, client: eventsapi.NewEventsClient(conn)}
	for topic := range Topics {
		s.filters = append(s.filters, fmt.Sprintf("namespace==%q,topic==%q", Namespace, topic))
	}
	return s, nil
}

// Close closes the connection.
func (s *Source) Close() error { return s.conn.Close() }

// Replaces reports whether err says that the runtime does not serve CRI
// GetContainerEvents (containerd 1.6 answers it Unimplemented).
func (s *Source) Replaces(err error) bool { return status.Code(err) == codes.Unimplemented }

// Follow subscribes to containerd's task and container events in
// Namespace and calls fn, on Follow's goroutine, with each event of
// Topics about a container's or sandbox's own process (the exits of
// exec'd processes, probes' among them, are left out) until the stream
// breaks or ctx ends. connected is called, on Follow's goroutine too,
// once the subscription is sent.
func (s *Source) Follow(ctx context.Context, connected func(), fn func(watch.RuntimeEvent)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := s.client.Subscribe(ctx, &eventsapi.SubscribeRequest{Filters: s.filters})
	if err != nil {
		return fmt.Errorf("subscribe to containerd events: %w", err)
	}
	// The request is sent; containerd sends nothing back until an event,
	// not even headers. The relist the caller runs on connected covers
	// what happens before containerd registers the subscription.
	connected()
	for {
		env, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("receive containerd event: %w", err)
		}
		if ev, ok := toEvent(env.GetTopic(), env.GetEvent()); ok && env.GetNamespace() == Namespace {
			fn(ev)
		}
	}
}

// toEvent decodes an event of Topics; false for another topic, an event
// of an exec'd process or one that does not decode.
func toEvent(topic string, any *anypb.Any) (watch.RuntimeEvent, bool) {
	typ, ok := Topics[topic]
	if !ok || any == nil {
		return watch.RuntimeEvent{}, false
	}
	v, err := typeurl.UnmarshalAny(any)
	if err != nil {
		return watch.RuntimeEvent{}, false
	}
	var id, exec string
	switch e := v.(type) {
	case *apievents.TaskStart:
		id = e.GetContainerID()
	case *apievents.TaskExit:
		// The init process's ID is the container's.
		id, exec = e.GetContainerID(), e.GetID()
	case *apievents.TaskDelete:
		id, exec = e.GetContainerID(), e.GetID()
	case *apievents.TaskOOM:
		id = e.GetContainerID()
	case *apievents.ContainerDelete:
		id = e.GetID()
	default:
		return watch.RuntimeEvent{}, false
	}
	if id == "" || (exec != "" && exec != id) {
		return watch.RuntimeEvent{}, false
	}
	return watch.RuntimeEvent{ID: id, Type: typ}, true
}
