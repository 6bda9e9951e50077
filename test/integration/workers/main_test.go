//go:build integration

// Package workers_test runs the engine's Node — pod workers, the store,
// probers, recovery, garbage collection — against a private containerd
// (internal/localcri): PODSYNC_CONTAINERD=2 (default) or 1.6. The tests
// run one at a time: a Node removes podsync's pods its store does not
// hold, which includes another test's.
package workers_test

import (
	"testing"

	"github.com/podsync/podsync/internal/localcri"
	"github.com/podsync/podsync/internal/localcri/localcritest"
)

// inst is the package's private containerd, started by TestMain.
var inst *localcri.Instance

func TestMain(m *testing.M) {
	localcritest.Main(m, localcritest.PodPackage("test/integration/workers", func(i *localcri.Instance) { inst = i }))
}
