package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/server"
)

// rpc is one method of PodSyncService, as the service descriptor lists it.
type rpc struct {
	name   string
	stream *grpc.StreamDesc // nil for a unary method
}

// everyRPC lists every method of PodSyncService from its descriptor, so a
// method added later is walked too.
func everyRPC() []rpc {
	desc := podsyncv1.PodSyncService_ServiceDesc
	var out []rpc
	for _, m := range desc.Methods {
		out = append(out, rpc{name: m.MethodName})
	}
	for _, s := range desc.Streams {
		out = append(out, rpc{name: s.StreamName, stream: &grpc.StreamDesc{StreamName: s.StreamName,
			ServerStreams: s.ServerStreams, ClientStreams: s.ClientStreams}})
	}
	return out
}

// callEmpty calls method with an empty request (an empty message decodes
// as any request type) and returns the status the call ends with.
func callEmpty(ctx context.Context, conn *grpc.ClientConn, r rpc) error {
	method := "/" + podsyncv1.PodSyncService_ServiceDesc.ServiceName + "/" + r.name
	if r.stream == nil {
		return conn.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{})
	}
	s, err := conn.NewStream(ctx, r.stream, method)
	if err != nil {
		return err
	}
	if err := s.SendMsg(&emptypb.Empty{}); err != nil {
		return s.RecvMsg(&emptypb.Empty{})
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		if err := s.RecvMsg(&emptypb.Empty{}); err != nil {
			return err
		}
	}
}

// TestReadinessGatesEveryMethod: before the node runs (no backend), every
// method of PodSyncService — walked from its service descriptor, so that a
// new RPC is covered the day it is added — answers UNAVAILABLE with
// reason RUNTIME_UNAVAILABLE from the one readiness gate, never
// UNIMPLEMENTED; health and reflection, other services, are not gated.
func TestReadinessGatesEveryMethod(t *testing.T) {
	svc := server.NewService(server.ServiceOptions{})
	_, _, conn := serveUnix(t, server.Options{Service: svc, Roles: server.Roles{Admin: []string{testdaemon.Self()}}})
	ctx := testContext(t)
	rpcs := everyRPC()
	if len(rpcs) < 24 {
		t.Fatalf("the descriptor lists %d methods", len(rpcs))
	}
	for _, r := range rpcs {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := callEmpty(cctx, conn, r)
		cancel()
		wantError(t, err, codes.Unavailable, errorinfo.ReasonRuntimeUnavailable)
		if t.Failed() {
			t.Fatalf("%s: %v", r.name, err)
		}
	}
	reflectionAnswers(t, ctx, conn)
}

// reflectionAnswers checks that server reflection, which the gate does not
// own, answers while the service is not ready.
func reflectionAnswers(t *testing.T, ctx context.Context, conn *grpc.ClientConn) {
	t.Helper()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true},
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := stream.RecvMsg(&emptypb.Empty{}); status.Code(err) == codes.Unavailable {
		t.Errorf("reflection is gated: %v", err)
	}
}

// TestEveryMethodIsImplemented: with a node behind it, no method of
// PodSyncService answers UNIMPLEMENTED (an empty request is refused for
// what it lacks, or answered; a watch runs until its deadline).
func TestEveryMethodIsImplemented(t *testing.T) {
	d := testdaemon.New(t, testdaemon.Options{})
	ctx := testContext(t)
	for _, r := range everyRPC() {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := callEmpty(cctx, d.Conn, r)
		cancel()
		if status.Code(err) == codes.Unimplemented {
			t.Errorf("%s: %v", r.name, err)
		}
	}
}

// TestReadinessFollowsTheBackend: calls arriving while the service has no
// backend are refused, those after SetBackend served, those after
// SetBackend(nil) refused again; a backend whose runtime has not answered
// yet (the health checker) refuses them too.
func TestReadinessFollowsTheBackend(t *testing.T) {
	d := testdaemon.New(t, testdaemon.Options{Transport: testdaemon.Bufconn})
	probe := &fakeProbe{}
	probe.down.Store(true)
	hc := server.NewHealthChecker(probe.probe, time.Hour, nil)
	svc := server.NewService(server.ServiceOptions{Health: hc})
	_, _, conn := serveUnix(t, server.Options{Service: svc, Roles: server.Roles{Admin: []string{testdaemon.Self()}}})
	c := podsyncv1.NewPodSyncServiceClient(conn)
	ctx := testContext(t)
	list := func() error {
		_, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{})
		return err
	}
	err := list()
	wantError(t, err, codes.Unavailable, errorinfo.ReasonRuntimeUnavailable)
	if !strings.Contains(status.Convert(err).Message(), "not connected") {
		t.Errorf("without a backend: %v", err)
	}
	svc.SetBackend(server.BackendOf(d.Node))
	err = list()
	wantError(t, err, codes.Unavailable, errorinfo.ReasonRuntimeUnavailable)
	if !strings.Contains(status.Convert(err).Message(), "has not answered") {
		t.Errorf("before the runtime answered: %v", err)
	}
	probe.down.Store(false)
	hctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = hc.Run(hctx) }()
	t.Cleanup(func() { stop(); <-done })
	waitFor(t, "the runtime answered", hc.Ready)
	if err := list(); err != nil {
		t.Errorf("with a backend: %v", err)
	}
	svc.SetBackend(nil)
	wantError(t, list(), codes.Unavailable, errorinfo.ReasonRuntimeUnavailable)
}
