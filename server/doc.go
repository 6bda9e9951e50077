// Package server puts the engine behind the podsync.v1 gRPC API
// (api/podsync/v1): it validates requests before anything changes on the
// node, authorizes callers, translates between the API and core/v1 with the
// public convert package, streams each sync step as it happens, and maps
// engine errors to gRPC status codes in one place.
//
// The contract it implements — every RPC's semantics, errors and
// idempotency — is written in proto/podsync/v1/pod_sync_service.proto.
package server
