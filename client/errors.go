package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/podsync/podsync/errorinfo"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo podsyncd sends.
const ErrorDomain = errorinfo.Domain

// Reasons of google.rpc.ErrorInfo that the SDK maps to its sentinels, as
// podsyncd sends them; package errorinfo defines them for the server and
// the SDK alike, with their codes and metadata. Branch on these (through
// Reason or errors.Is), never on an error's message. The admission
// reasons are the kubelet's spelling ("OutOfcpu", "NodePorts",
// "PodSecurity", …) and are not listed here.
const (
	ReasonInvalidSpec        = errorinfo.ReasonInvalidSpec
	ReasonPodNotFound        = errorinfo.ReasonPodNotFound
	ReasonContainerNotFound  = errorinfo.ReasonContainerNotFound
	ReasonPodAlreadyExists   = errorinfo.ReasonPodAlreadyExists
	ReasonUIDMismatch        = errorinfo.ReasonUIDMismatch
	ReasonSyncInProgress     = errorinfo.ReasonSyncInProgress
	ReasonPodTerminating     = errorinfo.ReasonPodTerminating
	ReasonRuntimeUnavailable = errorinfo.ReasonRuntimeUnavailable
	ReasonShuttingDown       = errorinfo.ReasonShuttingDown
	ReasonRevisionCompacted  = errorinfo.ReasonRevisionCompacted
	ReasonFutureRevision     = errorinfo.ReasonFutureRevision
	ReasonSlowConsumer       = errorinfo.ReasonSlowConsumer
	ReasonNoSpace            = errorinfo.ReasonNoSpace
	ReasonRateLimited        = errorinfo.ReasonRateLimited
	ReasonTooManyStreams     = errorinfo.ReasonTooManyStreams
	ReasonPermissionDenied   = errorinfo.ReasonPermissionDenied
	ReasonUnauthenticated    = errorinfo.ReasonUnauthenticated
	ReasonInternal           = errorinfo.ReasonInternal
	ReasonVolumeInUse        = errorinfo.ReasonVolumeInUse
	ReasonObjectNotFound     = errorinfo.ReasonObjectNotFound
	ReasonRevisionMismatch   = errorinfo.ReasonRevisionMismatch
	ReasonLeaseSuperseded    = errorinfo.ReasonLeaseSuperseded
	ReasonLeaseRequired      = errorinfo.ReasonLeaseRequired
	ReasonLeaseHeld          = errorinfo.ReasonLeaseHeld
	ReasonOwnedByFile        = errorinfo.ReasonOwnedByFile
	// ReasonContainerNotRunning: exec or attach needs a running container.
	ReasonContainerNotRunning = errorinfo.ReasonContainerNotRunning
	// ReasonPodNotRunning: port-forward needs a running pod.
	ReasonPodNotRunning = errorinfo.ReasonPodNotRunning
	// ReasonStreamFailed: the runtime failed a streaming session.
	ReasonStreamFailed = errorinfo.ReasonStreamFailed
)

// Sentinel errors. Every error a Client method returns for a failed call
// is an *Error, which matches these with errors.Is by its gRPC code and
// ErrorInfo reason; the table in the package documentation lists them.
var (
	// ErrNotFound: NOT_FOUND, an unknown pod or container.
	ErrNotFound = errors.New("not found")
	// ErrInvalidArgument: INVALID_ARGUMENT; FieldViolations lists the
	// fields at fault. Nothing was changed on the node.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrRejected: admission refused a new pod (FAILED_PRECONDITION, or
	// RESOURCE_EXHAUSTED for the capacity reasons "OutOf…"); Reason says
	// why.
	ErrRejected = errors.New("rejected by admission")
	// ErrUIDMismatch: the request's uid names another incarnation of the
	// pod: a precondition's ABORTED UID_MISMATCH (Metadata "uid" and
	// "revision" the live pod's), and SyncPod's or RunPods'
	// ALREADY_EXISTS.
	ErrUIDMismatch = errors.New("uid mismatch")
	// ErrAlreadyExists: ALREADY_EXISTS (a pod of the same name runs with
	// another uid; it also matches ErrUIDMismatch).
	ErrAlreadyExists = errors.New("already exists")
	// ErrUnavailable: UNAVAILABLE, podsyncd or its runtime does not answer,
	// or podsyncd is shutting down. Safe to retry with back-off.
	ErrUnavailable = errors.New("unavailable")
	// ErrPermissionDenied: PERMISSION_DENIED, the caller's role does not
	// allow the call.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrUnauthenticated: UNAUTHENTICATED, the caller presented no
	// identity podsyncd accepts.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrRevisionCompacted: WatchPods' since_revision is older than the
	// history kept (OUT_OF_RANGE, REVISION_COMPACTED). List again, or use
	// Watch, which does so.
	ErrRevisionCompacted = errors.New("revision compacted")
	// ErrSlowConsumer: a WatchPods stream was ended because its caller
	// fell behind (RESOURCE_EXHAUSTED, SLOW_CONSUMER). Resume with
	// since_revision, or use Watch, which does so.
	ErrSlowConsumer = errors.New("slow consumer")
	// ErrResourceExhausted: RESOURCE_EXHAUSTED for any reason: a rate
	// limit, a message too large, a slow watcher, an admission refusal
	// for lack of capacity.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrAborted: ABORTED, a sync of the pod is running or the pod is
	// being deleted. Retry.
	ErrAborted = errors.New("aborted")
	// ErrConflict: ABORTED, REVISION_MISMATCH, a write's revision
	// precondition (IfRevision, IfNotExists, an object's
	// resource_version) is not the current revision; nothing was changed.
	// Read again and retry (RetryOnConflict); CurrentRevision reads the
	// revision reported. It also matches ErrAborted.
	ErrConflict = errors.New("revision conflict")
	// ErrLeaseSuperseded: FAILED_PRECONDITION, LEASE_SUPERSEDED, the call
	// carries a lease epoch older than the node's lease (another control
	// plane took the node), or a lease call names an epoch that is not the
	// current one. Nothing was changed: stop driving the node.
	ErrLeaseSuperseded = errors.New("lease superseded")
	// ErrLeaseRequired: FAILED_PRECONDITION, LEASE_REQUIRED, podsyncd runs
	// with --require-lease and the call carries no current epoch of a held
	// lease. Acquire the lease (KeepLease).
	ErrLeaseRequired = errors.New("lease required")
	// ErrLeaseHeld: FAILED_PRECONDITION, LEASE_HELD, AcquireLease while
	// another identity holds the lease (Metadata "holder", "expire_time").
	ErrLeaseHeld = errors.New("lease held by another identity")
	// ErrOwnedByFile: FAILED_PRECONDITION, OWNED_BY_FILE, the pod or
	// object was read from podsyncd's manifest directory: change or
	// remove its file.
	ErrOwnedByFile = errors.New("owned by a file of the manifest directory")
	// ErrDeadlineExceeded: DEADLINE_EXCEEDED, the caller's deadline passed
	// (it also matches context.DeadlineExceeded). Work already done on the
	// node stays done.
	ErrDeadlineExceeded = errors.New("deadline exceeded")
	// ErrVolumeInUse is FAILED_PRECONDITION with reason VOLUME_IN_USE:
	// DeleteVolume of a named volume a stored pod names.
	ErrVolumeInUse = errors.New("volume in use")
)

// Error is a failed call: the gRPC status podsyncd (or the transport)
// returned, with its google.rpc details unpacked. It matches the package's
// sentinels with errors.Is, also context.Canceled and
// context.DeadlineExceeded for CANCELLED and DEADLINE_EXCEEDED, and
// status.FromError and status.Code see its status unchanged.
type Error struct {
	// Op is the method that failed, such as "GetPod".
	Op string
	// Object names what the call was about, such as "default/web"; empty
	// when the call names none.
	Object string
	// Code is the gRPC code.
	Code codes.Code
	// Reason is the ErrorInfo reason ("POD_NOT_FOUND", "OutOfcpu", …);
	// empty when the status carries no ErrorInfo, such as a transport
	// error.
	Reason string
	// Metadata is the ErrorInfo metadata, such as "uid" for UID_MISMATCH
	// or "compact_revision" for REVISION_COMPACTED; nil when there is none.
	Metadata map[string]string
	// Message is the status message.
	Message string
	// Violations are the google.rpc.BadRequest field violations of an
	// INVALID_ARGUMENT, with paths into the request such as
	// "pod.spec.containers[0].image".
	Violations []*errdetails.BadRequest_FieldViolation

	st    *status.Status
	cause error
}

// Error returns "podsync: Op Object: message", such as
// `podsync: GetPod default/web: pod "default/web" not found`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("podsync: ")
	b.WriteString(e.Op)
	if e.Object != "" {
		b.WriteString(" ")
		b.WriteString(e.Object)
	}
	b.WriteString(": ")
	msg := e.Message
	if msg == "" {
		msg = strings.ToLower(strings.ReplaceAll(codeName(e.Code), "_", " "))
	}
	b.WriteString(msg)
	return b.String()
}

// GRPCStatus returns the status of the call, so that status.FromError and
// status.Code work on an *Error.
func (e *Error) GRPCStatus() *status.Status {
	if e.st == nil {
		return status.New(e.Code, e.Message)
	}
	return e.st
}

// Unwrap returns the error the call returned: a gRPC status error, or the
// context's error when a wait on ctx ended.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is a sentinel that e's code and reason match,
// or context.Canceled or context.DeadlineExceeded for those codes.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == codes.NotFound
	case ErrInvalidArgument:
		return e.Code == codes.InvalidArgument
	case ErrRejected:
		return e.rejected()
	case ErrUIDMismatch:
		return e.Reason == ReasonUIDMismatch || e.Code == codes.AlreadyExists
	case ErrAlreadyExists:
		return e.Code == codes.AlreadyExists
	case ErrUnavailable:
		return e.Code == codes.Unavailable
	case ErrPermissionDenied:
		return e.Code == codes.PermissionDenied
	case ErrUnauthenticated:
		return e.Code == codes.Unauthenticated
	case ErrRevisionCompacted:
		return e.Reason == ReasonRevisionCompacted
	case ErrSlowConsumer:
		return e.Reason == ReasonSlowConsumer
	case ErrVolumeInUse:
		return e.Reason == ReasonVolumeInUse
	case ErrResourceExhausted:
		return e.Code == codes.ResourceExhausted
	case ErrAborted:
		return e.Code == codes.Aborted
	case ErrConflict:
		return e.Code == codes.Aborted && e.Reason == ReasonRevisionMismatch
	case ErrLeaseSuperseded:
		return e.Reason == ReasonLeaseSuperseded
	case ErrLeaseRequired:
		return e.Reason == ReasonLeaseRequired
	case ErrLeaseHeld:
		return e.Reason == ReasonLeaseHeld
	case ErrOwnedByFile:
		return e.Code == codes.FailedPrecondition && e.Reason == ReasonOwnedByFile
	case ErrDeadlineExceeded, context.DeadlineExceeded:
		return e.Code == codes.DeadlineExceeded
	case context.Canceled:
		return e.Code == codes.Canceled
	}
	return false
}

// rejected reports whether e is an admission refusal: FAILED_PRECONDITION
// other than UID_MISMATCH, or RESOURCE_EXHAUSTED with a capacity reason.
func (e *Error) rejected() bool {
	switch e.Code {
	case codes.FailedPrecondition:
		switch e.Reason {
		case ReasonUIDMismatch, ReasonVolumeInUse, ReasonOwnedByFile, ReasonLeaseSuperseded, ReasonLeaseRequired, ReasonLeaseHeld:
			return false
		}
		return true
	case codes.ResourceExhausted:
		return errorinfo.IsCapacityReason(e.Reason)
	}
	return false
}

// FieldViolations returns the field violations of an INVALID_ARGUMENT
// error (an *Error, or any error carrying a gRPC status), or nil.
func FieldViolations(err error) []*errdetails.BadRequest_FieldViolation {
	if e := asError(err); e != nil {
		return e.Violations
	}
	return nil
}

// Reason returns the google.rpc.ErrorInfo reason of err (an *Error, or any
// error carrying a gRPC status), or "" if it has none.
func Reason(err error) string {
	if e := asError(err); e != nil {
		return e.Reason
	}
	return ""
}

func asError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if st, ok := status.FromError(err); ok {
		return fromStatus("", "", st, err)
	}
	return nil
}

// wrap is the one translation of call errors: a gRPC status (or a
// context error) becomes an *Error for op on object; other errors get the
// same "podsync: op object: " prefix. wrap(nil) is nil.
func wrap(op, object string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if _, ok := err.(interface{ GRPCStatus() *status.Status }); !ok {
			return fromStatus(op, object, status.FromContextError(err), err)
		}
	}
	st, ok := status.FromError(err)
	if !ok {
		if object != "" {
			return fmt.Errorf("podsync: %s %s: %w", op, object, err)
		}
		return fmt.Errorf("podsync: %s: %w", op, err)
	}
	return fromStatus(op, object, st, err)
}

// newError is an *Error born in the client, such as a stream that ended
// early.
func newError(op, object string, c codes.Code, msg string) *Error {
	st := status.New(c, msg)
	return fromStatus(op, object, st, st.Err())
}

func fromStatus(op, object string, st *status.Status, cause error) *Error {
	e := &Error{Op: op, Object: object, Code: st.Code(), Message: st.Message(), st: st, cause: cause}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if e.Reason == "" {
				e.Reason = d.GetReason()
				if len(d.GetMetadata()) > 0 {
					e.Metadata = maps.Clone(d.GetMetadata())
				}
			}
		case *errdetails.BadRequest:
			e.Violations = append(e.Violations, d.GetFieldViolations()...)
		}
	}
	return e
}

// codeName is a code in the API's spelling, "NOT_FOUND".
func codeName(c codes.Code) string {
	switch c {
	case codes.Canceled:
		return "CANCELLED"
	case codes.DeadlineExceeded:
		return "DEADLINE_EXCEEDED"
	case codes.InvalidArgument:
		return "INVALID_ARGUMENT"
	case codes.NotFound:
		return "NOT_FOUND"
	case codes.AlreadyExists:
		return "ALREADY_EXISTS"
	case codes.PermissionDenied:
		return "PERMISSION_DENIED"
	case codes.ResourceExhausted:
		return "RESOURCE_EXHAUSTED"
	case codes.FailedPrecondition:
		return "FAILED_PRECONDITION"
	case codes.OutOfRange:
		return "OUT_OF_RANGE"
	case codes.Unauthenticated:
		return "UNAUTHENTICATED"
	case codes.DataLoss:
		return "DATA_LOSS"
	}
	return strings.ToUpper(c.String())
}
