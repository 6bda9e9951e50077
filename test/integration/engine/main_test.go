//go:build integration

// Package engine_test runs the engine's executor against a private
// containerd (internal/localcri): PODSYNC_CONTAINERD=2 (default) or 1.6.
package engine_test

import (
	"testing"

	"github.com/podsync/podsync/internal/localcri"
	"github.com/podsync/podsync/internal/localcri/localcritest"
)

// inst is the package's private containerd, started by TestMain.
var inst *localcri.Instance

func TestMain(m *testing.M) {
	localcritest.Main(m, localcritest.PodPackage("test/integration/engine", func(i *localcri.Instance) { inst = i }))
}
