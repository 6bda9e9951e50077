package syncer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// hungRuntime is a FakeRuntime whose calls named in hang block until
// their context ends, as calls to a frozen runtime do, and then fail as
// k8s.io/cri-client's do.
type hungRuntime struct {
	*enginetest.FakeRuntime
	hang map[string]bool
}

func (r *hungRuntime) block(ctx context.Context, method string) error {
	if !r.hang[method] {
		return nil
	}
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

func (r *hungRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if err := r.block(ctx, "ListPodSandbox"); err != nil {
		return nil, err
	}
	return r.FakeRuntime.ListPodSandbox(ctx, f)
}

func (r *hungRuntime) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	if err := r.block(ctx, "RunPodSandbox"); err != nil {
		return "", err
	}
	return r.FakeRuntime.RunPodSandbox(ctx, cfg, handler)
}

func (r *hungRuntime) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.block(ctx, "CreateContainer"); err != nil {
		return "", err
	}
	return r.FakeRuntime.CreateContainer(ctx, sandboxID, cfg, sbCfg)
}

// TestHungRuntimeCallEndsWithTheDeadline: a CRI call that hangs holds a
// pass only until the caller's deadline: the engine passes its context to
// every call, and the pass ends with the deadline's error. (The calls of
// the workers' own passes, which have no caller's deadline, are bounded by
// DialRuntime's per-call timeout, DefaultRuntimeTimeout; enginetest.Image pulls by
// the runtime's pull progress timeout.)
func TestHungRuntimeCallEndsWithTheDeadline(t *testing.T) {
	for _, method := range []string{"ListPodSandbox", "RunPodSandbox", "CreateContainer"} {
		t.Run(method, func(t *testing.T) {
			var rt *hungRuntime
			h := syncertest.New(t, func(o *syncer.SyncerOptions) {
				rt = &hungRuntime{FakeRuntime: o.Runtime.(*enginetest.FakeRuntime), hang: map[string]bool{method: true}}
				o.Runtime = rt
			})
			ctx, cancel := context.WithTimeout(h.Ctx, 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := h.S.SyncPod(ctx, enginetest.Pod(), h.In, nil)
			// The context's error, or the runtime's (cri-client's) for it.
			if !errors.Is(err, context.DeadlineExceeded) && status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("SyncPod with %s hung: %v, want the deadline's error", method, err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("SyncPod with %s hung took %s past a 200 ms deadline", method, d)
			}
		})
	}
}
