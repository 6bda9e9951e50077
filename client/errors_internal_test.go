package client

import (
	"context"
	"errors"
	"io"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func statusError(t *testing.T, c codes.Code, reason string) error {
	t.Helper()
	st := status.New(c, "message")
	if reason != "" {
		var err error
		if st, err = st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}); err != nil {
			t.Fatal(err)
		}
	}
	return st.Err()
}

// TestWrap: messages, context errors and errors without a status.
func TestWrap(t *testing.T) {
	if wrap("Op", "", nil) != nil {
		t.Error("wrap(nil) is not nil")
	}
	for _, tc := range []struct {
		err  error
		obj  string
		want string
	}{
		{statusError(t, codes.NotFound, ReasonPodNotFound), "default/web", "podsync: Op default/web: message"},
		{status.Error(codes.Unavailable, ""), "", "podsync: Op: unavailable"},
		{status.Error(codes.FailedPrecondition, ""), "", "podsync: Op: failed precondition"},
		{context.Canceled, "x", "podsync: Op x: context canceled"},
		{io.ErrUnexpectedEOF, "", "podsync: Op: unexpected EOF"},
	} {
		err := wrap("Op", tc.obj, tc.err)
		if err.Error() != tc.want {
			t.Errorf("wrap(%v) = %q, want %q", tc.err, err, tc.want)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("wrap(%v) does not unwrap to it", tc.err)
		}
	}
	if err := wrap("Op", "", context.Canceled); status.Code(err) != codes.Canceled {
		t.Errorf("wrap(context.Canceled): code %v", status.Code(err))
	}
	// An *Error passes through unchanged.
	e := newError("A", "", codes.Internal, "x")
	if got := wrap("B", "", e); got != e { //nolint:errorlint // identity is the point
		t.Errorf("wrap(*Error) = %v", got)
	}
}
