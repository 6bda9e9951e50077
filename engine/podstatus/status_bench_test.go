package podstatus

import (
	"testing"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan/plantest"
)

// BenchmarkComputePodStatus computes the status of a running 10-container
// pod, as every pass does after the plan.
func BenchmarkComputePodStatus(b *testing.B) {
	pod := plantest.BenchPod(10)
	view := plantest.BenchView(pod, func(int) bool { return false })
	opts := StatusOptions{HostIPs: []string{"127.0.0.1"}}
	b.ReportAllocs()
	for b.Loop() {
		_ = ComputePodStatus(pod, view, model.ProbeResults{}, plantest.BenchNow, opts)
	}
}
