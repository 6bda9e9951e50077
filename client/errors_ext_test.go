package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/server"
)

// sentinels are every sentinel error, for checking that an error matches
// exactly the expected ones.
var sentinels = map[string]error{
	"ErrNotFound":          client.ErrNotFound,
	"ErrInvalidArgument":   client.ErrInvalidArgument,
	"ErrRejected":          client.ErrRejected,
	"ErrUIDMismatch":       client.ErrUIDMismatch,
	"ErrAlreadyExists":     client.ErrAlreadyExists,
	"ErrUnavailable":       client.ErrUnavailable,
	"ErrPermissionDenied":  client.ErrPermissionDenied,
	"ErrUnauthenticated":   client.ErrUnauthenticated,
	"ErrRevisionCompacted": client.ErrRevisionCompacted,
	"ErrSlowConsumer":      client.ErrSlowConsumer,
	"ErrResourceExhausted": client.ErrResourceExhausted,
	"ErrAborted":           client.ErrAborted,
	"ErrConflict":          client.ErrConflict,
	"ErrLeaseSuperseded":   client.ErrLeaseSuperseded,
	"ErrLeaseRequired":     client.ErrLeaseRequired,
	"ErrLeaseHeld":         client.ErrLeaseHeld,
	"ErrOwnedByFile":       client.ErrOwnedByFile,
	"ErrDeadlineExceeded":  client.ErrDeadlineExceeded,
}

// wantError checks err's code, reason and the sentinels it matches (and no
// other), and that status.FromError sees the status.
func wantError(t *testing.T, err error, code codes.Code, reason string, match ...string) {
	t.Helper()
	e := clientError(t, err)
	if e.Code != code || e.Reason != reason || client.Reason(err) != reason {
		t.Errorf("error %v: code %v reason %q, want %v %q", err, e.Code, e.Reason, code, reason)
	}
	if st, ok := status.FromError(err); !ok || st.Code() != code {
		t.Errorf("status.FromError(%v) = %v, %v", err, st, ok)
	}
	for name, s := range sentinels {
		want := false
		for _, m := range match {
			want = want || m == name
		}
		if got := errors.Is(err, s); got != want {
			t.Errorf("errors.Is(%v, %s) = %v, want %v", err, name, got, want)
		}
	}
}

// clientError returns err as a *client.Error.
func clientError(t *testing.T, err error) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T): want a *client.Error", err, err)
	}
	return e
}

// TestErrorNotFound: GetPod of an unknown pod.
func TestErrorNotFound(t *testing.T) {
	c := newDaemon(t).client(t)
	_, err := c.GetPod(testContext(t), "", "nope")
	wantError(t, err, codes.NotFound, client.ReasonPodNotFound, "ErrNotFound")
	if !strings.HasPrefix(err.Error(), "podsync: GetPod default/nope: ") {
		t.Errorf("message %q", err)
	}
	err = c.Logs(testContext(t), &podsyncv1.GetContainerLogsRequest{Namespace: "ns", Name: "nope"}, func(*podsyncv1.LogLine) error { return nil })
	wantError(t, err, codes.NotFound, client.ReasonPodNotFound, "ErrNotFound")
	if !strings.HasPrefix(err.Error(), "podsync: Logs ns/nope: ") {
		t.Errorf("message %q", err)
	}
}

// TestErrorInvalidArgument: a bad image is INVALID_ARGUMENT with a field
// violation naming it, through FieldViolations.
func TestErrorInvalidArgument(t *testing.T) {
	c := newDaemon(t).client(t)
	req := syncReq(t, "", "web", nil)
	req.GetPod().GetSpec().GetContainers()[0].Image = "Not An Image!"
	_, err := c.SyncPod(testContext(t), req, nil)
	wantError(t, err, codes.InvalidArgument, client.ReasonInvalidSpec, "ErrInvalidArgument")
	e := clientError(t, err)
	var fields []string
	for _, v := range client.FieldViolations(err) {
		fields = append(fields, v.GetField())
	}
	if len(fields) != 1 || fields[0] != "pod.spec.containers[0].image" || len(e.Violations) != 1 {
		t.Errorf("field violations %q", fields)
	}
	if !strings.HasPrefix(err.Error(), "podsync: SyncPod default/web: ") {
		t.Errorf("message %q", err)
	}

	_, err = c.ListPods(testContext(t), &podsyncv1.ListPodsRequest{LabelSelector: "app in (("})
	wantError(t, err, codes.InvalidArgument, client.ReasonInvalidSpec, "ErrInvalidArgument")
	if len(client.FieldViolations(err)) == 0 {
		t.Error("ListPods with a bad selector: no field violations")
	}
	// FieldViolations and Reason read plain status errors too.
	_, err = c.API().ListPods(testContext(t), &podsyncv1.ListPodsRequest{LabelSelector: "app in (("})
	if client.Reason(err) != client.ReasonInvalidSpec || len(client.FieldViolations(err)) == 0 {
		t.Errorf("plain status error %v: reason %q, violations %v", err, client.Reason(err), client.FieldViolations(err))
	}
	if client.Reason(errors.New("plain")) != "" || client.FieldViolations(nil) != nil {
		t.Error("Reason or FieldViolations of a non-status error")
	}
}

// TestErrorUIDMismatch: DeletePod with another uid is UID_MISMATCH with the
// live uid; SyncPod with another explicit uid is ALREADY_EXISTS; both are
// ErrUIDMismatch.
func TestErrorUIDMismatch(t *testing.T) {
	c := newDaemon(t).client(t)
	res := syncPod(t, c, "", "web", nil)
	const other = "6f1e7a4e-1d5b-4a8e-9c3b-2f0a1b2c3d4e"
	_, err := c.DeletePod(testContext(t), &podsyncv1.DeletePodRequest{Name: "web", Uid: other})
	wantError(t, err, codes.Aborted, client.ReasonUIDMismatch, "ErrUIDMismatch", "ErrAborted")
	e := clientError(t, err)
	if e.Metadata["uid"] != res.GetPod().GetUid() {
		t.Errorf("metadata %v: want uid %s", e.Metadata, res.GetPod().GetUid())
	}

	req := syncReq(t, "", "web", nil)
	req.GetPod().GetMetadata().Uid = other
	_, err = c.SyncPod(testContext(t), req, nil)
	wantError(t, err, codes.AlreadyExists, client.ReasonPodAlreadyExists, "ErrUIDMismatch", "ErrAlreadyExists")
}

// TestErrorRejected: admission refusing a new pod for lack of CPU.
func TestErrorRejected(t *testing.T) {
	d := newDaemon(t, func(o *testdaemon.Options) {
		o.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10")}
	})
	c := d.client(t)
	pod := testPod("", "big", nil)
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	req, err := client.SyncPodRequestFromPod(pod, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SyncPod(testContext(t), req, nil)
	wantError(t, err, codes.ResourceExhausted, "OutOfcpu", "ErrRejected", "ErrResourceExhausted")
}

// TestErrorPermissionDenied: a read-only caller may list, not sync.
func TestErrorPermissionDenied(t *testing.T) {
	d := newDaemon(t, func(o *testdaemon.Options) {
		o.Server.Roles = server.Roles{Read: []string{testdaemon.Self()}}
	})
	c := d.client(t)
	if _, err := c.ListPods(testContext(t), &podsyncv1.ListPodsRequest{}); err != nil {
		t.Fatalf("ListPods as a reader: %v", err)
	}
	_, err := c.SyncPod(testContext(t), syncReq(t, "", "web", nil), nil)
	wantError(t, err, codes.PermissionDenied, client.ReasonPermissionDenied, "ErrPermissionDenied")
}

// TestErrorRevisionCompacted: WatchPods from a compacted revision.
func TestErrorRevisionCompacted(t *testing.T) {
	d := newDaemon(t)
	c := d.client(t)
	syncPod(t, c, "", "web", nil)
	if err := d.Store.Compact(d.Store.Revision()); err != nil {
		t.Fatal(err)
	}
	err := c.WatchPods(testContext(t), &podsyncv1.WatchPodsRequest{SinceRevision: 1}, func(*podsyncv1.WatchPodsResponse) error { return nil })
	wantError(t, err, codes.OutOfRange, client.ReasonRevisionCompacted, "ErrRevisionCompacted")
	e := clientError(t, err)
	if e.Metadata["compact_revision"] == "" {
		t.Errorf("metadata %v: no compact_revision", e.Metadata)
	}
}

// TestErrorDeadline: a call whose deadline passed matches
// ErrDeadlineExceeded and context.DeadlineExceeded.
func TestErrorDeadline(t *testing.T) {
	c := newDaemon(t).client(t)
	ctx, cancel := context.WithTimeout(testContext(t), 0)
	defer cancel()
	_, err := c.GetPod(ctx, "", "web")
	wantError(t, err, codes.DeadlineExceeded, "", "ErrDeadlineExceeded")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v: not context.DeadlineExceeded", err)
	}
}

// TestReasonsMatchErrorInfo: the SDK's reason constants are those of
// package errorinfo, which the server sends.
func TestReasonsMatchErrorInfo(t *testing.T) {
	for _, tc := range []struct{ client, server string }{
		{client.ErrorDomain, errorinfo.Domain},
		{client.ReasonInvalidSpec, errorinfo.ReasonInvalidSpec},
		{client.ReasonPodNotFound, errorinfo.ReasonPodNotFound},
		{client.ReasonContainerNotFound, errorinfo.ReasonContainerNotFound},
		{client.ReasonPodAlreadyExists, errorinfo.ReasonPodAlreadyExists},
		{client.ReasonUIDMismatch, errorinfo.ReasonUIDMismatch},
		{client.ReasonRevisionMismatch, errorinfo.ReasonRevisionMismatch},
		{client.ReasonLeaseSuperseded, errorinfo.ReasonLeaseSuperseded},
		{client.ReasonLeaseRequired, errorinfo.ReasonLeaseRequired},
		{client.ReasonLeaseHeld, errorinfo.ReasonLeaseHeld},
		{client.ReasonSyncInProgress, errorinfo.ReasonSyncInProgress},
		{client.ReasonPodTerminating, errorinfo.ReasonPodTerminating},
		{client.ReasonRuntimeUnavailable, errorinfo.ReasonRuntimeUnavailable},
		{client.ReasonShuttingDown, errorinfo.ReasonShuttingDown},
		{client.ReasonRevisionCompacted, errorinfo.ReasonRevisionCompacted},
		{client.ReasonFutureRevision, errorinfo.ReasonFutureRevision},
		{client.ReasonSlowConsumer, errorinfo.ReasonSlowConsumer},
		{client.ReasonNoSpace, errorinfo.ReasonNoSpace},
		{client.ReasonRateLimited, errorinfo.ReasonRateLimited},
		{client.ReasonPermissionDenied, errorinfo.ReasonPermissionDenied},
		{client.ReasonUnauthenticated, errorinfo.ReasonUnauthenticated},
		{client.ReasonInternal, errorinfo.ReasonInternal},
	} {
		if tc.client != tc.server {
			t.Errorf("client %q, server %q", tc.client, tc.server)
		}
	}
}

// TestErrorIs: the sentinels each code and reason matches, for statuses
// that came through gRPC.
func TestErrorIs(t *testing.T) {
	d := newDaemon(t, func(o *testdaemon.Options) { o.Transport = testdaemon.Bufconn })
	c := d.client(t)
	for _, tc := range []struct {
		code   codes.Code
		reason string
		want   []string
	}{
		{codes.NotFound, client.ReasonContainerNotFound, []string{"ErrNotFound"}},
		{codes.InvalidArgument, client.ReasonInvalidSpec, []string{"ErrInvalidArgument"}},
		{codes.FailedPrecondition, "NodePorts", []string{"ErrRejected"}},
		{codes.FailedPrecondition, "PodSecurity", []string{"ErrRejected"}},
		{codes.ResourceExhausted, "OutOfmemory", []string{"ErrRejected", "ErrResourceExhausted"}},

		{codes.AlreadyExists, client.ReasonPodAlreadyExists, []string{"ErrUIDMismatch", "ErrAlreadyExists"}},
		{codes.Unavailable, client.ReasonRuntimeUnavailable, []string{"ErrUnavailable"}},
		{codes.Unavailable, client.ReasonShuttingDown, []string{"ErrUnavailable"}},
		{codes.Unavailable, "", []string{"ErrUnavailable"}},
		{codes.PermissionDenied, client.ReasonPermissionDenied, []string{"ErrPermissionDenied"}},
		{codes.Unauthenticated, client.ReasonUnauthenticated, []string{"ErrUnauthenticated"}},
		{codes.OutOfRange, client.ReasonRevisionCompacted, []string{"ErrRevisionCompacted"}},
		{codes.OutOfRange, client.ReasonFutureRevision, nil},
		{codes.ResourceExhausted, client.ReasonSlowConsumer, []string{"ErrSlowConsumer", "ErrResourceExhausted"}},
		{codes.ResourceExhausted, client.ReasonRateLimited, []string{"ErrResourceExhausted"}},
		{codes.ResourceExhausted, "", []string{"ErrResourceExhausted"}},
		{codes.Aborted, client.ReasonSyncInProgress, []string{"ErrAborted"}},
		{codes.Aborted, client.ReasonPodTerminating, []string{"ErrAborted"}},
		{codes.Aborted, client.ReasonRevisionMismatch, []string{"ErrAborted", "ErrConflict"}},
		{codes.Aborted, client.ReasonUIDMismatch, []string{"ErrAborted", "ErrUIDMismatch"}},
		{codes.FailedPrecondition, client.ReasonLeaseSuperseded, []string{"ErrLeaseSuperseded"}},
		{codes.FailedPrecondition, client.ReasonLeaseRequired, []string{"ErrLeaseRequired"}},
		{codes.FailedPrecondition, client.ReasonLeaseHeld, []string{"ErrLeaseHeld"}},
		{codes.FailedPrecondition, client.ReasonOwnedByFile, []string{"ErrOwnedByFile"}},
		{codes.NotFound, client.ReasonObjectNotFound, []string{"ErrNotFound"}},
		{codes.DeadlineExceeded, "", []string{"ErrDeadlineExceeded"}},
		{codes.Canceled, "", nil},
		{codes.Unknown, client.ReasonInternal, nil},
		{codes.Internal, client.ReasonInternal, nil},
	} {
		injected := server.NewError(tc.code, tc.reason, "injected", map[string]string{"k": "v"})
		if tc.reason == "" {
			injected = status.Error(tc.code, "injected")
		}
		d.faults.getPodErr.Store(&injected)
		d.faults.failGetPod.Store(1)
		_, err := c.GetPod(testContext(t), "", "web")
		wantError(t, err, tc.code, tc.reason, tc.want...)
		if e := clientError(t, err); tc.reason != "" && e.Metadata["k"] != "v" {
			t.Errorf("%v %s: metadata %v", tc.code, tc.reason, e.Metadata)
		}
		if want := tc.code == codes.DeadlineExceeded; errors.Is(err, context.DeadlineExceeded) != want {
			t.Errorf("%v: errors.Is(context.DeadlineExceeded) = %v", tc.code, !want)
		}
		if want := tc.code == codes.Canceled; errors.Is(err, context.Canceled) != want {
			t.Errorf("%v: errors.Is(context.Canceled) = %v", tc.code, !want)
		}
	}
}
