package daemon

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

type idleStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s idleStream) Context() context.Context { return s.ctx }
func (idleStream) RecvMsg(any) error          { return nil }

// TestLateServiceForwardsEveryMethod: every method of PodSyncService,
// including one added later, is forwarded by lateService (UNAVAILABLE
// while no runtime is connected), not left to the embedded
// Unimplemented server.
func TestLateServiceForwardsEveryMethod(t *testing.T) {
	l := &lateService{}
	desc := podsyncv1.PodSyncService_ServiceDesc
	for _, m := range desc.Methods {
		_, err := m.Handler(l, t.Context(), func(any) error { return nil }, nil)
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want UNAVAILABLE", m.MethodName, err)
		}
	}
	for _, s := range desc.Streams {
		err := s.Handler(l, idleStream{ctx: t.Context()})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want UNAVAILABLE", s.StreamName, err)
		}
	}
}
