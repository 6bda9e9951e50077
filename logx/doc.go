// Package logx holds what podsync's structured logs share: the snake_case
// field keys (one definition for the engine and the server), Pod for the
// fields that name a pod, and the request scope carried in a context
// (WithFields, From), so that a line the engine writes on behalf of a
// request carries the request's id as the server's own lines do.
//
// It imports zap, k8s.io/api and the standard library only.
package logx
