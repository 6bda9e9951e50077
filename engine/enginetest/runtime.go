package enginetest

import (
	cri "k8s.io/cri-api/pkg/apis"
)

// Runtime is the container runtime the engine drives: CRI's runtime service
// (pod sandboxes and containers) and image service. k8s.io/cri-client's
// remote services implement it against containerd; FakeRuntime implements
// it in memory.
type Runtime interface {
	cri.RuntimeService
	cri.ImageManagerService
}

// ConformanceImage is the image RuntimeConformance runs its containers
// from: it must provide /bin/sh with busybox's applets (echo, sleep, ip)
// and be present or pullable. localcri.BusyboxImage is this image.
const ConformanceImage = "registry.local/busybox:local"

// TestDouble is implemented by runtimes that run no real processes, such as
// FakeRuntime. RuntimeConformance runs the rows marked RealOnly only on
// runtimes that do not implement it (or return false).
type TestDouble interface {
	IsTestDouble() bool
}
