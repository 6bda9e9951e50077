package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/server"
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

// blockedExecSync is a service whose ExecSync waits, once it has entered
// (entered), until release is closed or its caller gives up.
type blockedExecSync struct {
	podsyncv1.PodSyncServiceServer
	entered chan struct{}
	release chan struct{}
}

func (b *blockedExecSync) ExecSync(ctx context.Context, _ *podsyncv1.ExecSyncRequest) (*podsyncv1.ExecSyncResponse, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return &podsyncv1.ExecSyncResponse{}, nil
}

// TestEveryStreamAndCommandIsCounted: WatchObjects, health Watch and a
// running ExecSync count against the one per-identity budget with the
// watches of pods, logs and sessions (before, with a budget of 2, one
// identity opened 50 WatchObjects and 50 health watches, and ran 100
// ExecSyncs at once); one more is TOO_MANY_STREAMS, whatever its kind.
func TestEveryStreamAndCommandIsCounted(t *testing.T) {
	b := &blockedExecSync{entered: make(chan struct{}, 4), release: make(chan struct{})}
	d := testdaemon.New(t, testdaemon.Options{Server: server.Options{MaxStreamsPerIdentity: 2},
		Wrap: func(s podsyncv1.PodSyncServiceServer) podsyncv1.PodSyncServiceServer {
			b.PodSyncServiceServer = s
			return b
		}})
	ctx := testContext(t)
	streamCtx, closeStreams := context.WithCancel(ctx)
	defer closeStreams()

	objects, err := d.Client.WatchObjects(streamCtx, &podsyncv1.WatchObjectsRequest{})
	if err == nil {
		_, err = objects.Recv()
	}
	if err != nil {
		t.Fatalf("WatchObjects: %v", err)
	}
	healthCtx, closeHealth := context.WithCancel(streamCtx)
	hw, err := healthpb.NewHealthClient(d.Conn).Watch(healthCtx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = hw.Recv()
	}
	if err != nil {
		t.Fatalf("health Watch: %v", err)
	}
	_, err = d.Client.ExecSync(ctx, &podsyncv1.ExecSyncRequest{Namespace: "default", Name: "web", Command: []string{"true"}})
	wantError(t, err, codes.ResourceExhausted, errorinfo.ReasonTooManyStreams)
	if !strings.Contains(status.Convert(err).Message(), "ExecSync") {
		t.Errorf("message %q does not say what is counted", status.Convert(err).Message())
	}

	// The health watch closed, an ExecSync runs in its place and holds it.
	closeHealth()
	execDone := make(chan error, 1)
	for i := 0; ; i++ {
		go func() {
			_, err := d.Client.ExecSync(ctx, &podsyncv1.ExecSyncRequest{Namespace: "default", Name: "web", Command: []string{"true"}})
			execDone <- err
		}()
		select {
		case <-b.entered:
		case err := <-execDone:
			// The health watch was not yet counted off.
			if i == 200 || status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("ExecSync after the health watch closed: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		break
	}
	w, err := d.Client.WatchObjects(streamCtx, &podsyncv1.WatchObjectsRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	wantError(t, err, codes.ResourceExhausted, errorinfo.ReasonTooManyStreams)
	close(b.release)
	if err := <-execDone; err != nil {
		t.Errorf("the running ExecSync: %v", err)
	}
}
