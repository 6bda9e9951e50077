// Package errdefs is the engine's one error taxonomy (named after
// containerd's errdefs): the classes every engine package reports
// (ErrInvalidSpec, ErrNotFound, ErrAlreadyExists, ErrAdmission,
// ErrConflict, ErrTerminating, ErrRuntimeUnavailable), and the store's
// errors, whose pod errors are of those classes. Callers test them with
// errors.Is; server/errors.go maps each to one gRPC code, once.
//
// It is a leaf: it imports only the standard library, so the pure
// packages, the syncer, the store and the node can all share it.
package errdefs
