//go:build integration

// Package engine runs the engine's executor against a private
// containerd (internal/testing/localcri): PODSYNC_CONTAINERD=2 (default) or 1.6.
package engine
