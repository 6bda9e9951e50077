package syncer_test

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// stopRecorder records the timeouts of StopContainer.
type stopRecorder struct {
	*enginetest.FakeRuntime
	mu       sync.Mutex
	timeouts []int64
}

func (r *stopRecorder) StopContainer(ctx context.Context, id string, timeout int64) error {
	r.mu.Lock()
	r.timeouts = append(r.timeouts, timeout)
	r.mu.Unlock()
	return r.FakeRuntime.StopContainer(ctx, id, timeout)
}

// TestEvictedPodIsKilledWithTheEvictionGracePeriod: the containers of a
// pod whose status says Evicted are stopped with the kubelet eviction
// manager's 1 s override (the 2 s minimum of StopContainer), not the
// pod's 30 s; another failed pod gets its own grace period.
func TestEvictedPodIsKilledWithTheEvictionGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   int64
	}{{reason: plan.ReasonEvicted, want: 2}, {reason: "DeadlineExceeded", want: 30}} {
		t.Run(tc.reason, func(t *testing.T) {
			var rec *stopRecorder
			h := syncertest.New(t, func(o *syncer.SyncerOptions) {
				rec = &stopRecorder{FakeRuntime: o.Runtime.(*enginetest.FakeRuntime)}
				o.Runtime = rec
			})
			pod := enginetest.Pod() // grace 30 s
			h.Converged(pod, h.Sync(pod))
			pod.Status.Phase, pod.Status.Reason = corev1.PodFailed, tc.reason
			h.Sync(pod)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.timeouts) != 2 || rec.timeouts[0] != tc.want || rec.timeouts[1] != tc.want {
				t.Errorf("StopContainer timeouts %v, want %d for both containers", rec.timeouts, tc.want)
			}
		})
	}
}
