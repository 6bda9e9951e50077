//go:build integration

// Package daemon runs podsyncd as operators do — the binary, built
// once, started as a child process with flags and a config file — against
// a private containerd (internal/testing/localcri): PODSYNC_CONTAINERD=2 (default)
// or 1.6. It talks to it with grpcurl (PODSYNC_GRPCURL, set by the
// Makefile, or .tmp/bin/grpcurl) and with grpc-go clients, and checks the
// runtime with CRI.
//
// The tests run one at a time: a podsyncd on a new store refuses to
// start while the runtime holds another test's pods (a lost store), and
// one with history keeps them as orphans.
package daemon
