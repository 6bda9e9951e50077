//go:build integration

package integration

import (
	"testing"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/internal/testing/localcri"
)

func TestRuntimeConformance(t *testing.T) {
	enginetest.RuntimeConformance(t, newRuntime)
}

func TestConformanceImageIsLocal(t *testing.T) {
	if enginetest.ConformanceImage != localcri.BusyboxImage {
		t.Fatalf("enginetest.ConformanceImage = %q, want localcri.BusyboxImage %q", enginetest.ConformanceImage, localcri.BusyboxImage)
	}
}
