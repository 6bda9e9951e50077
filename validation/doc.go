// Package validation holds podsync's rules for the content of core/v1
// Pods, ConfigMaps and Secrets: what podsync accepts to run, decided from
// the objects alone. The server applies them to every request; the SDK and
// the CLI can apply the same before they send one.
//
// # Pods, ConfigMaps and Secrets
//
// ValidatePod (ValidatePodMetadata and ValidatePodSpec), ValidateConfigMap
// and ValidateSecret return every violation as a field.ErrorList, with
// paths in the API's JSON names below the path the caller gives:
// "spec.containers[1].image" for a nil path, or
// "pods[0].spec.containers[1].image" below "pods[0]". An empty list means
// the object is valid. A pod is validated after the API server's
// defaulting (convert.Default), as Kubernetes validates. Options carry what
// the objects alone do not say: the node's Limits and name, and the
// ConfigMaps and Secrets sent with the pods (Objects), which its volumes
// and env must find unless their references are optional. ValidateUID and
// ValidateGracePeriod are the rules for a pod's UID and grace period, for
// requests that name them. Mapping violations to gRPC status codes and
// field violations is the server's (server/errors.go).
//
// # Paths on the node
//
// CheckPodPaths, CheckFileName and CheckLocalPath are the rules for the
// values the engine turns into file names and paths on the node (a pod's
// UID, namespace and name, container and volume names, subPaths, item
// paths, hostPaths, localhost seccomp profiles). The engine runs them for
// every pod it is given, whoever the caller, and marks what they return
// errdefs.ErrInvalidSpec; resolving a subPath on the file system stays in
// the engine. ValidatePod is stricter: a pod it accepts passes them (the
// fuzz targets of this package and of the server check it).
//
// # Imports
//
// The package does no I/O: it imports no os, net or syscall. It imports no
// package of this module: not the API, the server, the engine, the client
// or internal/, and in practice not convert/ either, which the rules would
// allow but which brings the API's types, on which the engine (importing
// this package) may not depend. Besides the standard library it imports
// k8s.io/api, k8s.io/apimachinery and k8s.io/utils, and the parsers of
// image references (github.com/distribution/reference) and UUIDs
// (github.com/google/uuid). make check-deps and depguard enforce this.
package validation
