// Package validation holds podsync's rules for the values of core/v1
// objects that are pure: they decide from the object alone, without I/O.
//
// CheckPodPaths, CheckFileName and CheckLocalPath are the rules for the
// values the engine turns into file names and paths on the node (a pod's
// UID, namespace and name, container and volume names, subPaths, item
// paths, hostPaths, localhost seccomp profiles). The engine runs them for
// every pod it is given, whoever the caller, and marks what they return as
// engine.ErrInvalidSpec; resolving a subPath on the file system stays in
// the engine.
//
// # Imports
//
// The package does no I/O: it imports no os, net or syscall. It imports no
// package of this module: not the API, the server, the engine, the client
// or internal/, and in practice not convert/ either, which the rules would
// allow but which brings the API's types, on which the engine (importing
// this package) may not depend. Besides the standard library it imports
// k8s.io/api, k8s.io/apimachinery and k8s.io/utils. make check-deps and
// depguard enforce this.
package validation
