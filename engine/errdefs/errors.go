package errdefs

import (
	"errors"
	"fmt"
)

// Error classes of the engine. Callers test them with errors.Is; the server
// maps each to one gRPC code (server/errors.go toStatus).
var (
	// ErrInvalidSpec reports a pod spec the engine cannot act on, such as an
	// invalid hostname or an unknown DNS policy.
	ErrInvalidSpec = errors.New("invalid pod spec")
	// ErrNotFound reports a missing object: a pod, a CRI object, or a
	// ConfigMap, Secret or key a container refers to without optional.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists reports an object that already exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrAdmission reports a pod the node refuses to run.
	ErrAdmission = errors.New("pod not admitted")
	// ErrConflict reports that a sync is already running for the pod UID.
	ErrConflict = errors.New("conflict")
	// ErrTerminating reports a pod that is being deleted: it can be neither
	// applied nor synced until the deletion ends. It is an ErrConflict.
	ErrTerminating = fmt.Errorf("pod is terminating: %w", ErrConflict)
	// ErrOwnedByFile reports a change through the API of a pod or object
	// read from the manifest directory, whose file owns it.
	ErrOwnedByFile = errors.New("owned by a file of the manifest directory")
	// ErrRuntimeUnavailable reports that the container runtime did not answer.
	ErrRuntimeUnavailable = errors.New("container runtime unavailable")
	// ErrVolumeInUse reports a named volume that a pod of the node names,
	// which cannot be removed.
	ErrVolumeInUse = errors.New("volume in use")
	// ErrNotRunning reports a container or pod that must run for the call
	// (exec, attach, port-forward) but does not.
	ErrNotRunning = errors.New("not running")
	// ErrStreamFailed reports a streaming session (exec, attach,
	// port-forward) that the runtime's streaming server failed or ended
	// after it started.
	ErrStreamFailed = errors.New("streaming session failed")
)

// InvalidSpec marks each non-nil error of errs (validation's path checks,
// say) as ErrInvalidSpec ("<what> <value> <why>: invalid pod spec") and
// joins them; it returns nil if every error is nil.
func InvalidSpec(errs ...error) error {
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, fmt.Errorf("%w: %w", err, ErrInvalidSpec))
		}
	}
	return errors.Join(out...)
}

// RuntimeUnavailable adds ErrRuntimeUnavailable to err if unavailable (the
// node's classifier: gRPC UNAVAILABLE, for podsyncd) says it is the error
// of a runtime that did not answer. A nil err, a nil classifier and an
// err that already wraps ErrRuntimeUnavailable are returned as they are.
func RuntimeUnavailable(err error, unavailable func(error) bool) error {
	if err == nil || unavailable == nil || errors.Is(err, ErrRuntimeUnavailable) || !unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrRuntimeUnavailable, err)
}
