//go:build integration

package integration

import (
	"testing"

	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// inst is the package's private containerd, started by TestMain.
var inst *localcri.Instance

// logger writes to stderr, which go test shows.
var logger = localcritest.Logger()

func TestMain(m *testing.M) {
	localcritest.Main(m, localcritest.Config{
		Package: "test/integration",
		Logger:  logger,
		Started: func(i *localcri.Instance) error { inst = i; return nil },
	})
}
