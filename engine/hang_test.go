package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
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
			h := newHarness(t, func(o *engine.SyncerOptions) {
				rt = &hungRuntime{FakeRuntime: o.Runtime.(*enginetest.FakeRuntime), hang: map[string]bool{method: true}}
				o.Runtime = rt
			})
			ctx, cancel := context.WithTimeout(h.ctx, 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := h.s.SyncPod(ctx, enginetest.Pod(), h.in, nil)
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

// TestNodeRuntimeUnavailable: with NodeOptions.RuntimeUnavailable, an
// apply whose CRI calls find the runtime away fails with an error
// wrapping ErrRuntimeUnavailable (the server's UNAVAILABLE); without it,
// the runtime's error is returned as it is.
func TestNodeRuntimeUnavailable(t *testing.T) {
	for _, classify := range []bool{true, false} {
		t.Run(fmt.Sprintf("classifier %v", classify), func(t *testing.T) {
			h := newNodeHarness(t, func(o *engine.NodeOptions) {
				if classify {
					o.RuntimeUnavailable = func(err error) bool { return status.Code(err) == codes.Unavailable }
				}
			})
			// A first pod: the node has recovered and runs.
			first := enginetest.Pod()
			first.Name, first.UID = "first", "uid-first"
			h.apply(first)
			for range 5 {
				h.rt.InjectError("ListPodSandbox", status.Error(codes.Unavailable, "connection refused"))
			}
			_, err := h.node.Apply(h.ctx, enginetest.Pod(), nil, nil, nil)
			if err == nil || errors.Is(err, errdefs.ErrRuntimeUnavailable) != classify {
				t.Errorf("Apply with the runtime away: %v; want an error, wrapping ErrRuntimeUnavailable: %v", err, classify)
			}
		})
	}
}
