//go:build integration

package engine_test

import (
	"testing"

	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// inst is the package's private containerd, started by TestMain.
var inst *localcri.Instance

func TestMain(m *testing.M) {
	localcritest.Main(m, localcritest.PodPackage("test/integration/engine", func(i *localcri.Instance) { inst = i }))
}
