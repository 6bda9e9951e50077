// Package server puts the engine behind the podsync.v1 gRPC API
// (api/podsync/v1): it validates requests before anything changes on the
// node, authorizes callers, translates between the API and core/v1 with the
// public convert package, streams each sync step as it happens, and maps
// engine errors to gRPC status codes in one place.
//
// The contract it implements — every RPC's semantics, errors and
// idempotency — is written in proto/podsync/v1/pod_sync_service.proto.
//
// # Validation
//
// A Validator checks each request kind (ValidateRunPodsRequest,
// ValidateSyncPodRequest, …) and returns every violation as a
// field.ErrorList whose paths name the request's fields in the API's JSON
// names, such as "pods[0].spec.containers[1].image". It checks what is the
// request's own (its fields, its size, how many pods it carries and that
// they are unique); the content of its pods, ConfigMaps and Secrets is
// checked by package validation, which the SDK and the CLI share. Pods are
// checked after the API server's defaulting (convert.Default), as
// Kubernetes does, so a manifest that a cluster accepts means the same
// here. PodsFromRequest does the conversion, defaulting and validation in
// one call and returns the core/v1 objects the engine takes. A handler
// validates first and returns the violations with InvalidRequest; nothing
// reaches the runtime before.
//
// # Errors
//
// Handlers return nil, err. UnaryErrorInterceptor and
// StreamErrorInterceptor turn err into a status with ToStatus, the only
// place where errors become codes: engine sentinels map to codes as in
// STYLE.md, every status carries a google.rpc.ErrorInfo (domain
// errorinfo.Domain) whose reason clients branch on (package errorinfo), and
// INVALID_ARGUMENT carries a google.rpc.BadRequest with one field violation
// per problem. An unclassified error reaches the client as UNKNOWN with a
// short message; its full chain is for the log, which the logging
// interceptor, installed outside the error interceptors, writes.
package server
