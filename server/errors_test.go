package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/server"
)

// admissionError is how the engine is expected to report a refusal: an
// error of class errdefs.ErrAdmission with the kubelet's reason.
type admissionError struct {
	reason, message string
}

func (e *admissionError) Error() string  { return e.message }
func (e *admissionError) Reason() string { return e.reason }
func (e *admissionError) Unwrap() error  { return errdefs.ErrAdmission }
func (e *admissionError) Metadata() map[string]string {
	return map[string]string{"pod": "shop/web"}
}

func admission(reason string) error {
	return fmt.Errorf("admit pod %q: %w", "shop/web", &admissionError{reason: reason, message: "node has insufficient " + reason})
}

func info(reason string, metadata map[string]string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: reason, Domain: errorinfo.Domain, Metadata: metadata}
}

// statusCase is one row of the mapping from errors to statuses.
type statusCase struct {
	name   string
	err    error
	code   codes.Code
	info   *errdetails.ErrorInfo // nil: none
	fields []string              // BadRequest field paths; nil: no BadRequest
	msg    string                // exact message; "" means err.Error()
}

func statusCases() []statusCase {
	validation := server.InvalidRequest(field.ErrorList{
		field.Required(field.NewPath("pods").Index(0).Child("spec", "containers").Index(1).Child("image"), ""),
		field.Invalid(field.NewPath("timeout"), "0s", "must be greater than 0"),
	})
	notFound := fmt.Errorf("get pod shop/web: %w", errdefs.ErrNotFound)
	passThrough := status.Error(codes.PermissionDenied, "role read may not call SyncPod")
	own := server.NewError(codes.ResourceExhausted, errorinfo.ReasonRateLimited, "slow down", map[string]string{"identity": "ci"})
	return []statusCase{
		{name: "status error passes through", err: passThrough, code: codes.PermissionDenied},
		{name: "podsync status error passes through", err: own, code: codes.ResourceExhausted,
			info: info(errorinfo.ReasonRateLimited, map[string]string{"identity": "ci"})},
		{name: "ValidationError", err: fmt.Errorf("run pods: %w", validation), code: codes.InvalidArgument,
			info:   info(errorinfo.ReasonInvalidSpec, map[string]string{errorinfo.MetadataViolations: "2"}),
			fields: []string{"pods[0].spec.containers[1].image", "timeout"}},
		{name: "convert.InvalidError", err: &convert.InvalidError{Kind: "Pod", Name: "web", Errors: field.ErrorList{
			field.Forbidden(field.NewPath("spec", "tolerations"), "not supported by podsync"),
		}}, code: codes.InvalidArgument,
			info:   info(errorinfo.ReasonInvalidSpec, map[string]string{errorinfo.MetadataViolations: "1"}),
			fields: []string{"spec.tolerations"}},
		{name: "field.Error", err: field.Invalid(field.NewPath("labelSelector"), "a=", "bad"), code: codes.InvalidArgument,
			info:   info(errorinfo.ReasonInvalidSpec, map[string]string{errorinfo.MetadataViolations: "1"}),
			fields: []string{"labelSelector"}},
		{name: "ErrInvalidSpec", err: fmt.Errorf("dns config: %w", errdefs.ErrInvalidSpec), code: codes.InvalidArgument,
			info: info(errorinfo.ReasonInvalidSpec, map[string]string{errorinfo.MetadataViolations: "0"})},
		{name: "ErrNotFound", err: notFound, code: codes.NotFound, info: info(errorinfo.ReasonPodNotFound, nil)},
		{name: "ErrNotFound with a reason", err: server.WithReason(notFound, errorinfo.ReasonContainerNotFound, map[string]string{"container": "app"}),
			code: codes.NotFound, info: info(errorinfo.ReasonContainerNotFound, map[string]string{"container": "app"})},
		{name: "ErrAlreadyExists", err: fmt.Errorf("pod shop/web has uid 1, not 2: %w", errdefs.ErrAlreadyExists),
			code: codes.AlreadyExists, info: info(errorinfo.ReasonPodAlreadyExists, nil)},
		{name: "admission OutOfcpu", err: admission(admit.ReasonOutOfCPU), code: codes.ResourceExhausted,
			info: info(admit.ReasonOutOfCPU, map[string]string{"pod": "shop/web"})},
		{name: "admission OutOfmemory", err: admission(admit.ReasonOutOfMemory), code: codes.ResourceExhausted,
			info: info(admit.ReasonOutOfMemory, map[string]string{"pod": "shop/web"})},
		{name: "admission OutOfpods", err: admission(admit.ReasonOutOfPods), code: codes.ResourceExhausted,
			info: info(admit.ReasonOutOfPods, map[string]string{"pod": "shop/web"})},
		{name: "admission NodePorts", err: admission(admit.ReasonNodePorts), code: codes.FailedPrecondition,
			info: info(admit.ReasonNodePorts, map[string]string{"pod": "shop/web"})},
		{name: "admission policy", err: admission("HostPathNotAllowed"), code: codes.FailedPrecondition,
			info: info("HostPathNotAllowed", map[string]string{"pod": "shop/web"})},
		{name: "admission without reason", err: fmt.Errorf("admit: %w", errdefs.ErrAdmission), code: codes.FailedPrecondition,
			info: info(errorinfo.ReasonUnexpectedAdmissionError, nil)},
		{name: "ErrConflict", err: fmt.Errorf("sync pod uid 1: %w", errdefs.ErrConflict), code: codes.Aborted,
			info: info(errorinfo.ReasonSyncInProgress, nil)},
		{name: "ErrTerminating", err: fmt.Errorf("apply pod a/b: %w", errdefs.ErrTerminating), code: codes.Aborted,
			info: info(errorinfo.ReasonPodTerminating, nil)},
		{name: "ErrConflict while deleting", err: server.WithReason(errdefs.ErrConflict, errorinfo.ReasonPodTerminating, nil), code: codes.Aborted,
			info: info(errorinfo.ReasonPodTerminating, nil)},
		{name: "ErrObjectNotFound", err: fmt.Errorf("get ConfigMap a/b: %w", errdefs.ErrObjectNotFound), code: codes.NotFound,
			info: info(errorinfo.ReasonObjectNotFound, nil)},
		{name: "revision mismatch", err: fmt.Errorf("put pod a/b: %w", &errdefs.PreconditionError{Kind: errdefs.RevisionMismatch, What: "pod a/b", Revision: 12, UID: "u1", Want: "at revision 9"}),
			code: codes.Aborted, info: info(errorinfo.ReasonRevisionMismatch, map[string]string{"revision": "12", "uid": "u1"})},
		{name: "revision mismatch of an absent object", err: &errdefs.PreconditionError{Kind: errdefs.RevisionMismatch, What: "ConfigMap a/b", Want: "at resourceVersion 3"},
			code: codes.Aborted, info: info(errorinfo.ReasonRevisionMismatch, map[string]string{"revision": "0"})},
		{name: "uid mismatch", err: &errdefs.PreconditionError{Kind: errdefs.UIDMismatch, What: "pod a/b", Revision: 4, UID: "u2", Want: "uid u1"},
			code: codes.Aborted, info: info(errorinfo.ReasonUIDMismatch, map[string]string{"revision": "4", "uid": "u2"})},
		{name: "lease superseded", err: fmt.Errorf("put pod a/b: %w", &errdefs.LeaseError{Class: errdefs.ErrLeaseSuperseded, Epoch: 1, Current: 2, Holder: "cn:b"}),
			code: codes.FailedPrecondition, info: info(errorinfo.ReasonLeaseSuperseded, map[string]string{"epoch": "2", "holder": "cn:b"})},
		{name: "lease required", err: &errdefs.LeaseError{Class: errdefs.ErrLeaseRequired, Current: 2},
			code: codes.FailedPrecondition, info: info(errorinfo.ReasonLeaseRequired, map[string]string{"epoch": "2", "holder": ""})},
		{name: "ErrOwnedByFile", err: fmt.Errorf("pod a/b: %w", errdefs.ErrOwnedByFile), code: codes.FailedPrecondition,
			info: info(errorinfo.ReasonOwnedByFile, nil)},
		{name: "ErrNotRunning", err: fmt.Errorf("exec in container \"web\": %w", errdefs.ErrNotRunning), code: codes.FailedPrecondition,
			info: info(errorinfo.ReasonContainerNotRunning, nil)},
		{name: "ErrStreamFailed", err: fmt.Errorf("port-forward: %w", errdefs.ErrStreamFailed), code: codes.Unavailable,
			info: info(errorinfo.ReasonStreamFailed, nil)},
		{name: "ErrRuntimeUnavailable", err: fmt.Errorf("list sandboxes: %w", errdefs.ErrRuntimeUnavailable), code: codes.Unavailable,
			info: info(errorinfo.ReasonRuntimeUnavailable, nil)},
		{name: "full disk", err: fmt.Errorf("store pod shop/web: %w", &fs.PathError{Op: "write", Path: "/var/lib/podsync/podsync.db", Err: syscall.ENOSPC}),
			code: codes.ResourceExhausted, info: info(errorinfo.ReasonNoSpace, nil)},
		{name: "context.Canceled", err: fmt.Errorf("wait for pod: %w", context.Canceled), code: codes.Canceled,
			info: info(errorinfo.ReasonCanceled, nil)},
		{name: "context.DeadlineExceeded", err: fmt.Errorf("wait for pod: %w", context.DeadlineExceeded), code: codes.DeadlineExceeded,
			info: info(errorinfo.ReasonDeadlineExceeded, nil)},
		{name: "canceled CRI call", err: fmt.Errorf("start container: %w", status.Error(codes.Canceled, "context canceled")),
			code: codes.Canceled, info: info(errorinfo.ReasonCanceled, nil)},
		{name: "runtime's NotFound is not ours", err: fmt.Errorf("start container: %w", status.Error(codes.NotFound, "no such container")),
			code: codes.Unknown, info: info(errorinfo.ReasonInternal, nil), msg: "internal error; podsyncd's log has the details"},
		{name: "other", err: fmt.Errorf("open /var/lib/podsync/state.db: %w", errors.New("permission denied")),
			code: codes.Unknown, info: info(errorinfo.ReasonInternal, nil), msg: "internal error; podsyncd's log has the details"},
		{name: "errdefs.CompactedError", err: fmt.Errorf("watch: %w", &errdefs.CompactedError{Revision: 3, CompactRevision: 40}),
			code: codes.OutOfRange, info: info(errorinfo.ReasonRevisionCompacted, map[string]string{errorinfo.MetadataCompactRevision: "40"})},
		{name: "errdefs.ErrFutureRevision", err: fmt.Errorf("watch from 99: %w", errdefs.ErrFutureRevision),
			code: codes.OutOfRange, info: info(errorinfo.ReasonFutureRevision, nil)},
		{name: "errdefs.SlowConsumerError", err: &errdefs.SlowConsumerError{LastRevision: 12},
			code: codes.ResourceExhausted, info: info(errorinfo.ReasonSlowConsumer, map[string]string{errorinfo.MetadataRevision: "12"})},
		{name: "errdefs.ErrPodNotFound", err: fmt.Errorf("get shop/web: %w", errdefs.ErrPodNotFound),
			code: codes.NotFound, info: info(errorinfo.ReasonPodNotFound, nil)},
		{name: "errdefs.ErrPodExists", err: fmt.Errorf("put shop/web: %w", errdefs.ErrPodExists),
			code: codes.AlreadyExists, info: info(errorinfo.ReasonPodAlreadyExists, nil)},
		{name: "errdefs.ErrPodDeleting", err: fmt.Errorf("put shop/web: %w", errdefs.ErrPodDeleting),
			code: codes.Aborted, info: info(errorinfo.ReasonPodTerminating, nil)},
		{name: "errdefs.ErrStoreClosed", err: fmt.Errorf("list: %w", errdefs.ErrStoreClosed),
			code: codes.Unavailable, info: info(errorinfo.ReasonShuttingDown, nil)},
		{name: "revision compacted", err: server.RevisionCompactedError(42), code: codes.OutOfRange,
			info: info(errorinfo.ReasonRevisionCompacted, map[string]string{errorinfo.MetadataCompactRevision: "42"})},
		{name: "slow consumer", err: server.SlowConsumerError(7), code: codes.ResourceExhausted,
			info: info(errorinfo.ReasonSlowConsumer, map[string]string{errorinfo.MetadataRevision: "7"})},
	}
}

// checkStatus compares a status with a row of statusCases.
func checkStatus(t *testing.T, tt statusCase, st *status.Status) {
	t.Helper()
	if st.Code() != tt.code {
		t.Errorf("code = %s, want %s", st.Code(), tt.code)
	}
	wantMsg := tt.msg
	if wantMsg == "" {
		if s, ok := status.FromError(tt.err); ok {
			wantMsg = s.Message()
		} else {
			wantMsg = tt.err.Error()
		}
	}
	if st.Message() != wantMsg {
		t.Errorf("message = %q, want %q", st.Message(), wantMsg)
	}
	gotInfo, br := details(t, st)
	if diff := cmp.Diff(tt.info, gotInfo, protocmp.Transform()); diff != "" {
		t.Errorf("ErrorInfo (-want +got):\n%s", diff)
	}
	var fields []string
	for _, fv := range br.GetFieldViolations() {
		fields = append(fields, fv.GetField())
	}
	if diff := cmp.Diff(tt.fields, fields); diff != "" {
		t.Errorf("BadRequest fields (-want +got):\n%s", diff)
	}
}

func TestToStatus(t *testing.T) {
	for _, tt := range statusCases() {
		t.Run(tt.name, func(t *testing.T) {
			checkStatus(t, tt, server.ToStatus(tt.err))
		})
	}
	t.Run("nil", func(t *testing.T) {
		if st := server.ToStatus(nil); st.Code() != codes.OK || st.Err() != nil {
			t.Errorf("ToStatus(nil) = %v, want OK", st)
		}
	})
	t.Run("status error unchanged", func(t *testing.T) {
		err := status.Error(codes.PermissionDenied, "no")
		want, _ := status.FromError(err)
		if diff := cmp.Diff(want.Proto(), server.ToStatus(err).Proto(), protocmp.Transform()); diff != "" {
			t.Errorf("status (-want +got):\n%s", diff)
		}
	})
	t.Run("violation details", func(t *testing.T) {
		err := server.InvalidRequest(field.ErrorList{
			field.NotSupported(field.NewPath("pods").Index(0).Child("spec", "restartPolicy"), "Sometimes", []string{"Always", "Never"}),
		})
		_, br := details(t, server.ToStatus(err))
		want := &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
			Field:       "pods[0].spec.restartPolicy",
			Description: `Unsupported value: "Sometimes": supported values: "Always", "Never"`,
			Reason:      "NOT_SUPPORTED",
		}}}
		if diff := cmp.Diff(want, br, protocmp.Transform()); diff != "" {
			t.Errorf("BadRequest (-want +got):\n%s", diff)
		}
	})
}

// fakeService answers GetPod and WatchPods with the error of the pod's
// name, after one message for WatchPods.
type fakeService struct {
	podsyncv1.UnimplementedPodSyncServiceServer
	errs map[string]error
}

func (s *fakeService) GetPod(_ context.Context, req *podsyncv1.GetPodRequest) (*podsyncv1.GetPodResponse, error) {
	if err := s.errs[req.GetName()]; err != nil {
		return nil, err
	}
	return &podsyncv1.GetPodResponse{Revision: 1}, nil
}

func (s *fakeService) WatchPods(req *podsyncv1.WatchPodsRequest, stream grpc.ServerStreamingServer[podsyncv1.WatchPodsResponse]) error {
	if err := stream.Send(&podsyncv1.WatchPodsResponse{Revision: 1}); err != nil {
		return err
	}
	return s.errs[req.GetNamespace()]
}

// seen is what an interceptor outside the error interceptors, such as the
// logging one, observed.
type seen struct {
	mu   sync.Mutex
	errs []error
}

func (s *seen) record(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

func (s *seen) last() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) == 0 {
		return nil
	}
	return s.errs[len(s.errs)-1]
}

// newTestClient serves svc over bufconn with the error interceptors inside
// recording ones, and returns a client of it.
func newTestClient(t *testing.T, svc podsyncv1.PodSyncServiceServer, outer *seen) podsyncv1.PodSyncServiceClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(
			func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				resp, err := h(ctx, req)
				outer.record(err)
				return resp, err
			},
			server.UnaryErrorInterceptor(),
		),
		grpc.ChainStreamInterceptor(
			func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				err := h(srv, ss)
				outer.record(err)
				return err
			},
			server.StreamErrorInterceptor(),
		),
	)
	podsyncv1.RegisterPodSyncServiceServer(srv, svc)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return podsyncv1.NewPodSyncServiceClient(conn)
}

// TestInterceptors sends every row of the mapping through a real gRPC
// server and client, on a unary and a streaming RPC.
func TestInterceptors(t *testing.T) {
	cases := statusCases()
	svc := &fakeService{errs: map[string]error{}}
	for i, tt := range cases {
		// GetPod takes the error by name, WatchPods by namespace.
		svc.errs[fmt.Sprintf("case-%d", i)] = tt.err
	}
	outer := &seen{}
	client := newTestClient(t, svc, outer)

	for i, tt := range cases {
		key := fmt.Sprintf("case-%d", i)
		t.Run("unary/"+tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := client.GetPod(ctx, &podsyncv1.GetPodRequest{Name: key})
			checkStatus(t, tt, status.Convert(err))
			checkOuter(t, tt, outer.last())
		})
		t.Run("stream/"+tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			stream, err := client.WatchPods(ctx, &podsyncv1.WatchPodsRequest{Namespace: key})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != nil {
				t.Fatalf("first message: %v", err)
			}
			_, err = stream.Recv()
			checkStatus(t, tt, status.Convert(err))
			checkOuter(t, tt, outer.last())
		})
	}

	t.Run("success", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		resp, err := client.GetPod(ctx, &podsyncv1.GetPodRequest{Name: "fine"})
		if err != nil || resp.GetRevision() != 1 {
			t.Errorf("GetPod = %v, %v; want revision 1", resp, err)
		}
		stream, err := client.WatchPods(ctx, &podsyncv1.WatchPodsRequest{Namespace: "fine"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
			t.Errorf("end of stream = %v, want io.EOF", err)
		}
	})
}

// checkOuter checks what an outer (logging) interceptor sees: the code the
// client gets, and the original error for the log.
func checkOuter(t *testing.T, tt statusCase, err error) {
	t.Helper()
	if got := status.Code(err); got != tt.code {
		t.Errorf("outer interceptor code = %s, want %s", got, tt.code)
	}
	if !errors.Is(err, tt.err) {
		t.Errorf("outer interceptor error %v does not wrap the handler's error", err)
	}
	if _, isStatus := tt.err.(interface{ GRPCStatus() *status.Status }); !isStatus && !strings.Contains(err.Error(), tt.err.Error()) {
		t.Errorf("outer interceptor error %q lacks the full chain %q", err, tt.err)
	}
}
