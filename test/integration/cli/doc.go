//go:build integration

// Package cli runs podsyncctl as users do — the binary, against a
// podsyncd binary on a private containerd (internal/testing/localcri):
// PODSYNC_CONTAINERD=2 (default) or 1.6 — with the manifests of examples/,
// and checks what it prints, its exit codes and, through CRI, what runs.
//
// The tests run one at a time, each with its own podsyncd: a podsyncd
// removes podsync's pods its store does not hold, another test's included.
package cli
