package server

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/errorinfo"
)

// TestFrameWriterSendsBoundedFrames: a large write goes out as frames of
// at most maxFrameBytes, in order, each counted.
func TestFrameWriterSendsBoundedFrames(t *testing.T) {
	var frames [][]byte
	x := &sessionIO{sl: &sessionLog{}, send: func(p []byte, stderr bool) error {
		frames = append(frames, bytes.Clone(p))
		return nil
	}}
	data := bytes.Repeat([]byte("0123456789"), 10_000) // 100 kB
	n, err := frameWriter{x: x}.Write(data)
	if err != nil || n != len(data) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if len(frames) != 4 || !bytes.Equal(bytes.Join(frames, nil), data) {
		t.Errorf("%d frames; want 4 of at most %d bytes, the data in order", len(frames), maxFrameBytes)
	}
	for i, f := range frames {
		if len(f) > maxFrameBytes {
			t.Errorf("frame %d: %d bytes", i, len(f))
		}
	}
	if got := x.sl.out.get(); got != int64(len(data)) {
		t.Errorf("counted %d bytes out, want %d", got, len(data))
	}
}

// TestSessionErrors: a container that does not run is FAILED_PRECONDITION
// CONTAINER_NOT_RUNNING naming it; an unknown one NOT_FOUND
// CONTAINER_NOT_FOUND.
func TestSessionErrors(t *testing.T) {
	for _, tt := range []struct {
		err    error
		code   codes.Code
		reason string
	}{
		{fmt.Errorf("exec: container %q: %w", "app", errdefs.ErrNotRunning), codes.FailedPrecondition, errorinfo.ReasonContainerNotRunning},
		{fmt.Errorf("exec: container %q: %w", "app", errdefs.ErrNotFound), codes.NotFound, errorinfo.ReasonContainerNotFound},
	} {
		st := ToStatus(sessionError(tt.err, "app"))
		if st.Code() != tt.code || reasonOfStatus(st.Details()) != tt.reason {
			t.Errorf("%v: %v %v, want %v %s", tt.err, st.Code(), st.Details(), tt.code, tt.reason)
		}
	}
}

// TestSessionStartsAreValidated: the first request must be a start naming
// a pod, and a command for Exec; a port must be 1–65535.
func TestSessionStartsAreValidated(t *testing.T) {
	v := &Validator{}
	if errs := v.ValidateExecStart(nil); len(errs) != 1 || errs[0].Field != "start" {
		t.Errorf("no start: %v", errs)
	}
	if errs := v.ValidateExecStart(&podsyncv1.ExecStart{Name: "web"}); len(errs) != 1 || errs[0].Field != "start.command" {
		t.Errorf("no command: %v", errs)
	}
	if errs := v.ValidateExecStart(&podsyncv1.ExecStart{Name: "web", Container: "A_B", Command: []string{"sh"}}); len(errs) != 1 || errs[0].Field != "start.container" {
		t.Errorf("bad container name: %v", errs)
	}
	if errs := v.ValidatePortForwardStart(&podsyncv1.PortForwardStart{Name: "web", Port: 70000}); len(errs) != 1 || errs[0].Field != "start.port" {
		t.Errorf("port 70000: %v", errs)
	}
	if errs := v.ValidateExecSyncRequest(&podsyncv1.ExecSyncRequest{Name: "web", Command: []string{"true"}}); len(errs) != 0 {
		t.Errorf("a good ExecSync: %v", errs)
	}
}

// reasonOfStatus is the ErrorInfo reason among a status's details.
func reasonOfStatus(details []any) string {
	for _, d := range details {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.GetReason()
		}
	}
	return ""
}
