//go:build integration

// Package workers runs the engine's Node — pod workers, the store,
// probers, recovery, garbage collection — against a private containerd
// (internal/testing/localcri): PODSYNC_CONTAINERD=2 (default) or 1.6. The tests
// run one at a time: a Node removes podsync's pods its store does not
// hold, which includes another test's.
package workers
