package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/errorinfo"
)

// maxFieldViolations bounds the violations sent in one BadRequest, so that
// a status stays well below the header limits of proxies.
const maxFieldViolations = 100

// maxMessageViolations bounds the violations spelled out in a
// ValidationError's message.
const maxMessageViolations = 5

// ValidationError reports an invalid request: one field.Error per
// violation, with paths into the request. ToStatus makes it
// INVALID_ARGUMENT with a google.rpc.BadRequest. It matches
// errdefs.ErrInvalidSpec with errors.Is.
type ValidationError struct {
	// Errors are the violations; never empty.
	Errors field.ErrorList
}

// InvalidRequest returns a *ValidationError for errs, or nil when errs is
// empty, so that a handler can write
//
//	if err := InvalidRequest(v.ValidateGetPodRequest(req)); err != nil {
//		return nil, err
//	}
func InvalidRequest(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: errs}
}

// Error lists the first violations.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid request: ")
	for i, fe := range e.Errors {
		if i == maxMessageViolations {
			fmt.Fprintf(&b, "; and %d more", len(e.Errors)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(fe.Error())
	}
	return b.String()
}

// Is reports whether target is errdefs.ErrInvalidSpec.
func (e *ValidationError) Is(target error) bool {
	return target == errdefs.ErrInvalidSpec
}

// Reasoner is implemented by errors that carry a stable reason, such as the
// engine's admission errors ("OutOfcpu"). ToStatus takes ErrorInfo.reason
// from the first Reasoner in an error's chain; if that error also has a
// method Metadata() map[string]string, its entries become
// ErrorInfo.metadata. The reason does not choose the code, except that
// capacity reasons of errdefs.ErrAdmission ("OutOf…") make it
// RESOURCE_EXHAUSTED.
type Reasoner interface {
	Reason() string
}

type metadataer interface {
	Metadata() map[string]string
}

// WithReason returns err with a stable reason and metadata for ToStatus
// (see Reasoner); errors.Is and errors.As see through it. It returns nil if
// err is nil. Handlers use it where the sentinel alone does not say enough:
//
//	return nil, WithReason(err, errorinfo.ReasonContainerNotFound,
//		map[string]string{errorinfo.MetadataContainer: name})
func WithReason(err error, reason string, metadata map[string]string) error {
	if err == nil {
		return nil
	}
	return &reasonError{err: err, reason: reason, metadata: metadata}
}

type reasonError struct {
	err      error
	reason   string
	metadata map[string]string
}

func (e *reasonError) Error() string               { return e.err.Error() }
func (e *reasonError) Unwrap() error               { return e.err }
func (e *reasonError) Reason() string              { return e.reason }
func (e *reasonError) Metadata() map[string]string { return e.metadata }

// NewError returns a status error with code c, message msg and an
// ErrorInfo of errorinfo.Domain with reason and metadata. It is for errors
// that are born at the gRPC edge (authorization, rate limits, watch
// streams); ToStatus passes them through unchanged.
func NewError(c codes.Code, reason, msg string, metadata map[string]string) error {
	return newStatus(c, reason, msg, metadata).Err()
}

// RevisionCompactedError is WatchPods' error for a since_revision older
// than the history kept: OUT_OF_RANGE, reason REVISION_COMPACTED, metadata
// compact_revision.
func RevisionCompactedError(compactRevision int64) error {
	return NewError(codes.OutOfRange, errorinfo.ReasonRevisionCompacted,
		fmt.Sprintf("revision compacted: watch from revision %d or later, or list again", compactRevision),
		map[string]string{errorinfo.MetadataCompactRevision: strconv.FormatInt(compactRevision, 10)})
}

// SlowConsumerError ends a WatchPods stream whose caller fell too far
// behind: RESOURCE_EXHAUSTED, reason SLOW_CONSUMER, metadata revision (the
// last revision sent, to resume after).
func SlowConsumerError(lastRevision int64) error {
	return NewError(codes.ResourceExhausted, errorinfo.ReasonSlowConsumer,
		fmt.Sprintf("watcher too slow: resume with since_revision %d", lastRevision),
		map[string]string{errorinfo.MetadataRevision: strconv.FormatInt(lastRevision, 10)})
}

// unknownMessage is all a client learns of an unclassified error.
const unknownMessage = "internal error; podsyncd's log has the details"

// ToStatus translates an error to the gRPC status the client receives. It
// is the only place where errors become codes (STYLE.md "Errors → status"):
//
//	status error (top of the chain)     unchanged
//	*ValidationError, *convert.InvalidError, *field.Error,
//	errdefs.ErrInvalidSpec               INVALID_ARGUMENT, BadRequest, INVALID_SPEC
//	errdefs.ErrObjectNotFound            NOT_FOUND, OBJECT_NOT_FOUND
//	*errdefs.PreconditionError           ABORTED, REVISION_MISMATCH or UID_MISMATCH,
//	                                    revision and uid (the current ones)
//	*errdefs.LeaseError                  FAILED_PRECONDITION, LEASE_SUPERSEDED, LEASE_REQUIRED
//	                                    or LEASE_HELD, epoch, holder (and expire_time)
//	errdefs.ErrOwnedByFile               FAILED_PRECONDITION, OWNED_BY_FILE
//	errdefs.ErrNotFound                  NOT_FOUND, POD_NOT_FOUND
//	errdefs.ErrAlreadyExists             ALREADY_EXISTS, POD_ALREADY_EXISTS
//	errdefs.ErrAdmission                 FAILED_PRECONDITION, or RESOURCE_EXHAUSTED
//	                                    for "OutOf…" reasons; the engine's reason
//	errdefs.ErrTerminating               ABORTED, POD_TERMINATING
//	errdefs.ErrConflict                  ABORTED, SYNC_IN_PROGRESS
//	errdefs.ErrRuntimeUnavailable        UNAVAILABLE, RUNTIME_UNAVAILABLE
//	errdefs.ErrVolumeInUse               FAILED_PRECONDITION, VOLUME_IN_USE
//	errdefs.ErrNotRunning                FAILED_PRECONDITION, CONTAINER_NOT_RUNNING
//	errdefs.ErrStreamFailed              UNAVAILABLE, STREAM_FAILED
//	errdefs.ErrCompacted                OUT_OF_RANGE, REVISION_COMPACTED, compact_revision
//	errdefs.ErrFutureRevision           OUT_OF_RANGE, FUTURE_REVISION
//	errdefs.ErrSlowConsumer             RESOURCE_EXHAUSTED, SLOW_CONSUMER, revision
//	errdefs.ErrStoreClosed              UNAVAILABLE, SHUTTING_DOWN
//	syscall.ENOSPC (a full disk)        RESOURCE_EXHAUSTED, NO_SPACE
//	context.Canceled                    CANCELLED, CANCELED
//	context.DeadlineExceeded            DEADLINE_EXCEEDED, DEADLINE_EXCEEDED
//	anything else                       UNKNOWN, INTERNAL, a short message
//
// The store's errors are the engine's (engine/errdefs): its pod errors are
// of the classes above (ErrPodNotFound an ErrNotFound, ErrPodExists an
// ErrAlreadyExists, ErrPodDeleting an ErrTerminating, ErrInvalidRecord an
// ErrInvalidSpec), so one taxonomy is mapped once, whether a handler's
// error comes through the node or from the store directly.
//
// Every status it makes carries a google.rpc.ErrorInfo of
// errorinfo.Domain with a reason of package errorinfo (or, for admission,
// the engine's); a Reasoner in the chain overrides the default reason.
// Classified errors keep their message; an unclassified one gets a short
// message only, so the caller must log the error itself (the interceptors
// return an error whose Error() is the full chain for the logging
// interceptor). A status error wrapped deeper in the chain, such as a CRI
// call's, is not passed through: its code is the runtime's, not
// podsync's; only CANCELLED and DEADLINE_EXCEEDED are kept. ToStatus(nil)
// is nil, which is OK.
func ToStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	if se, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		if st := se.GRPCStatus(); st != nil {
			return st
		}
	}
	reason, metadata := reasonOf(err)
	orDefault := func(def string) string {
		if reason != "" {
			return reason
		}
		return def
	}

	if st := contractStatus(err, metadata); st != nil {
		return st
	}
	if violations, ok := fieldViolations(err); ok {
		return invalidArgument(err.Error(), orDefault(errorinfo.ReasonInvalidSpec), metadata, violations)
	}
	switch {
	case errors.Is(err, errdefs.ErrInvalidSpec):
		return invalidArgument(err.Error(), orDefault(errorinfo.ReasonInvalidSpec), metadata, nil)
	case errors.Is(err, errdefs.ErrObjectNotFound):
		return newStatus(codes.NotFound, orDefault(errorinfo.ReasonObjectNotFound), err.Error(), metadata)
	case errors.Is(err, errdefs.ErrOwnedByFile):
		return newStatus(codes.FailedPrecondition, orDefault(errorinfo.ReasonOwnedByFile), err.Error(), metadata)
	case errors.Is(err, errdefs.ErrNotFound):
		return newStatus(codes.NotFound, orDefault(errorinfo.ReasonPodNotFound), err.Error(), metadata)
	case errors.Is(err, errdefs.ErrAlreadyExists):
		return newStatus(codes.AlreadyExists, orDefault(errorinfo.ReasonPodAlreadyExists), err.Error(), metadata)
	case errors.Is(err, errdefs.ErrAdmission):
		r := orDefault(errorinfo.ReasonUnexpectedAdmissionError)
		code := codes.FailedPrecondition
		if errorinfo.IsCapacityReason(r) {
			code = codes.ResourceExhausted
		}
		return newStatus(code, r, err.Error(), metadata)
	case errors.Is(err, errdefs.ErrTerminating):
		return newStatus(codes.Aborted, orDefault(errorinfo.ReasonPodTerminating), err.Error(), metadata)
	case errors.Is(err, errdefs.ErrConflict):
		return newStatus(codes.Aborted, orDefault(errorinfo.ReasonSyncInProgress), err.Error(), metadata)
	case errors.Is(err, errdefs.ErrRuntimeUnavailable):
		return newStatus(codes.Unavailable, orDefault(errorinfo.ReasonRuntimeUnavailable), err.Error(), metadata)
	case errors.Is(err, errdefs.ErrVolumeInUse):
		return newStatus(codes.FailedPrecondition, orDefault(errorinfo.ReasonVolumeInUse), err.Error(), metadata)
	case errors.Is(err, errdefs.ErrNotRunning):
		return newStatus(codes.FailedPrecondition, orDefault(errorinfo.ReasonContainerNotRunning), err.Error(), metadata)
	case errors.Is(err, errdefs.ErrStreamFailed):
		return newStatus(codes.Unavailable, orDefault(errorinfo.ReasonStreamFailed), err.Error(), metadata)
	}
	if st := storeStatus(err, orDefault, metadata); st != nil {
		return st
	}
	if errors.Is(err, syscall.ENOSPC) {
		return newStatus(codes.ResourceExhausted, orDefault(errorinfo.ReasonNoSpace), err.Error(), metadata)
	}
	switch {
	case errors.Is(err, context.Canceled) || wrappedCode(err) == codes.Canceled:
		return newStatus(codes.Canceled, orDefault(errorinfo.ReasonCanceled), err.Error(), metadata)
	case errors.Is(err, context.DeadlineExceeded) || wrappedCode(err) == codes.DeadlineExceeded:
		return newStatus(codes.DeadlineExceeded, orDefault(errorinfo.ReasonDeadlineExceeded), err.Error(), metadata)
	}
	return newStatus(codes.Unknown, orDefault(errorinfo.ReasonInternal), unknownMessage, metadata)
}

// contractStatus maps a failed precondition or a refused lease, or
// returns nil: their metadata are the current revision and uid, or the
// current lease, so that the caller can read again and retry.
func contractStatus(err error, metadata map[string]string) *status.Status {
	var (
		pe *errdefs.PreconditionError
		le *errdefs.LeaseError
	)
	md := maps.Clone(metadata)
	if md == nil {
		md = map[string]string{}
	}
	switch {
	case errors.As(err, &pe):
		reason := errorinfo.ReasonRevisionMismatch
		if pe.Kind == errdefs.UIDMismatch {
			reason = errorinfo.ReasonUIDMismatch
		}
		if pe.Revision != 0 || !pe.Exists {
			md[errorinfo.MetadataRevision] = strconv.FormatInt(pe.Revision, 10)
		}
		if pe.UID != "" {
			md[errorinfo.MetadataUID] = pe.UID
		}
		return newStatus(codes.Aborted, reason, err.Error(), md)
	case errors.As(err, &le):
		reason := errorinfo.ReasonLeaseSuperseded
		switch {
		case errors.Is(le.Class, errdefs.ErrLeaseRequired):
			reason = errorinfo.ReasonLeaseRequired
		case errors.Is(le.Class, errdefs.ErrLeaseHeld):
			reason = errorinfo.ReasonLeaseHeld
			md[errorinfo.MetadataExpireTime] = le.Expires.UTC().Format(time.RFC3339)
		}
		md[errorinfo.MetadataEpoch] = strconv.FormatInt(le.Current, 10)
		md[errorinfo.MetadataHolder] = le.Holder
		return newStatus(codes.FailedPrecondition, reason, err.Error(), md)
	}
	return nil
}

// storeStatus maps the store's own errors (errdefs' ErrCompacted,
// ErrFutureRevision, ErrSlowConsumer, ErrStoreClosed), or returns nil: its
// pod errors are of the classes ToStatus maps first.
func storeStatus(err error, orDefault func(string) string, metadata map[string]string) *status.Status {
	with := func(k string, v int64) map[string]string {
		md := make(map[string]string, len(metadata)+1)
		maps.Copy(md, metadata)
		md[k] = strconv.FormatInt(v, 10)
		return md
	}
	var (
		compacted *errdefs.CompactedError
		slow      *errdefs.SlowConsumerError
	)
	switch {
	case errors.As(err, &compacted):
		return newStatus(codes.OutOfRange, orDefault(errorinfo.ReasonRevisionCompacted), err.Error(),
			with(errorinfo.MetadataCompactRevision, compacted.CompactRevision))
	case errors.Is(err, errdefs.ErrCompacted):
		return newStatus(codes.OutOfRange, orDefault(errorinfo.ReasonRevisionCompacted), err.Error(), metadata)
	case errors.Is(err, errdefs.ErrFutureRevision):
		return newStatus(codes.OutOfRange, orDefault(errorinfo.ReasonFutureRevision), err.Error(), metadata)
	case errors.As(err, &slow):
		return newStatus(codes.ResourceExhausted, orDefault(errorinfo.ReasonSlowConsumer), err.Error(),
			with(errorinfo.MetadataRevision, slow.LastRevision))
	case errors.Is(err, errdefs.ErrSlowConsumer):
		return newStatus(codes.ResourceExhausted, orDefault(errorinfo.ReasonSlowConsumer), err.Error(), metadata)
	case errors.Is(err, errdefs.ErrStoreClosed):
		return newStatus(codes.Unavailable, orDefault(errorinfo.ReasonShuttingDown), err.Error(), metadata)
	}
	return nil
}

// wrappedCode is the code of a status error in err's chain, or OK.
func wrappedCode(err error) codes.Code {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code()
	}
	return codes.OK
}

func reasonOf(err error) (string, map[string]string) {
	var r Reasoner
	if !errors.As(err, &r) {
		return "", nil
	}
	var md map[string]string
	if m, ok := r.(metadataer); ok {
		md = m.Metadata()
	}
	return r.Reason(), md
}

// fieldViolations finds the field errors of err's chain.
func fieldViolations(err error) (field.ErrorList, bool) {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Errors, true
	}
	var ie *convert.InvalidError
	if errors.As(err, &ie) {
		return ie.Errors, true
	}
	var fe *field.Error
	if errors.As(err, &fe) {
		return field.ErrorList{fe}, true
	}
	return nil, false
}

func invalidArgument(msg, reason string, metadata map[string]string, errs field.ErrorList) *status.Status {
	md := make(map[string]string, len(metadata)+1)
	maps.Copy(md, metadata)
	md[errorinfo.MetadataViolations] = strconv.Itoa(len(errs))
	info := errorInfo(reason, md)
	if len(errs) == 0 {
		return withDetails(status.New(codes.InvalidArgument, msg), info)
	}
	br := &errdetails.BadRequest{}
	for i, fe := range errs {
		if i == maxFieldViolations {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
				Description: fmt.Sprintf("%d more violations not shown", len(errs)-i),
				Reason:      "TRUNCATED",
			})
			break
		}
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
			Field:       fe.Field,
			Description: fe.ErrorBody(),
			Reason:      violationReason(fe.Type),
		})
	}
	return withDetails(status.New(codes.InvalidArgument, msg), info, br)
}

// violationReason is a field error's type in upper snake case, the
// FieldViolation.reason clients may branch on: REQUIRED, INVALID,
// NOT_SUPPORTED, DUPLICATE, NOT_FOUND, FORBIDDEN, TOO_LONG, TOO_MANY, ….
func violationReason(t field.ErrorType) string {
	switch t {
	case field.ErrorTypeRequired:
		return "REQUIRED"
	case field.ErrorTypeInvalid:
		return "INVALID"
	case field.ErrorTypeNotSupported:
		return "NOT_SUPPORTED"
	case field.ErrorTypeDuplicate:
		return "DUPLICATE"
	case field.ErrorTypeNotFound:
		return "NOT_FOUND"
	case field.ErrorTypeForbidden:
		return "FORBIDDEN"
	case field.ErrorTypeTooLong:
		return "TOO_LONG"
	case field.ErrorTypeTooShort:
		return "TOO_SHORT"
	case field.ErrorTypeTooMany:
		return "TOO_MANY"
	case field.ErrorTypeTooFew:
		return "TOO_FEW"
	case field.ErrorTypeTypeInvalid:
		return "TYPE_INVALID"
	}
	return "INTERNAL"
}

func errorInfo(reason string, metadata map[string]string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: reason, Domain: errorinfo.Domain, Metadata: metadata}
}

func newStatus(c codes.Code, reason, msg string, metadata map[string]string) *status.Status {
	return withDetails(status.New(c, msg), errorInfo(reason, metadata))
}

func withDetails(st *status.Status, details ...protoadapt.MessageV1) *status.Status {
	with, err := st.WithDetails(details...)
	if err != nil {
		// Only an OK code or a detail that cannot be marshalled fails;
		// neither happens here, and the code matters more than details.
		return st
	}
	return with
}

// statusError is what the interceptors return: the status the client
// receives, with the original error kept for the interceptors outside them
// (logging, metrics), which see the full chain in Error() and can use
// errors.Is.
type statusError struct {
	st    *status.Status
	cause error
}

func (e *statusError) Error() string              { return e.cause.Error() }
func (e *statusError) Unwrap() error              { return e.cause }
func (e *statusError) GRPCStatus() *status.Status { return e.st }

// toError applies ToStatus for the interceptors.
func toError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	return &statusError{st: ToStatus(err), cause: err}
}

// UnaryErrorInterceptor translates the error a unary handler returns with
// ToStatus. Handlers return nil, err and never build statuses themselves.
// Install it inside the logging interceptor, which then sees the original
// chain (Error()) and the final code (status.Code).
func UnaryErrorInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			return nil, toError(err)
		}
		return resp, nil
	}
}

// StreamErrorInterceptor translates the error a stream handler returns
// with ToStatus, as UnaryErrorInterceptor does.
func StreamErrorInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return toError(handler(srv, ss))
	}
}
