package server_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testdaemon"
)

// TestStreamsPerIdentityAreBounded: an identity holds at most
// MaxStreamsPerIdentity watch and log streams open; one more is refused
// with RESOURCE_EXHAUSTED (TOO_MANY_STREAMS) before it costs anything, and
// closing one makes room. Unary calls are not counted.
func TestStreamsPerIdentityAreBounded(t *testing.T) {
	h := newFullHarness(t, func(o *testdaemon.Options) { o.Server.MaxStreamsPerIdentity = 2 })
	open := func() (podsyncv1.PodSyncService_WatchPodsClient, context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(h.ctx)
		w, err := h.c.WatchPods(ctx, &podsyncv1.WatchPodsRequest{})
		if err == nil {
			// The status arrives with the first receive.
			_, err = w.Recv()
		}
		return w, cancel, err
	}
	_, cancel1, err := open()
	if err != nil {
		t.Fatal(err)
	}
	_, cancel2, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer cancel2()
	_, cancel3, err := open()
	cancel3()
	wantError(t, err, codes.ResourceExhausted, errorinfo.ReasonTooManyStreams)
	if _, err := h.c.ListPods(h.ctx, &podsyncv1.ListPodsRequest{}); err != nil {
		t.Errorf("a unary call beside the open streams: %v", err)
	}
	cancel1()
	// The server counts the closed stream off once its handler returns.
	for i := 0; ; i++ {
		_, c, err := open()
		c()
		if err == nil {
			break
		}
		if i == 200 {
			t.Fatalf("a watch after one was closed: %v", err)
		}
	}
}
