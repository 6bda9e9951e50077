package engine_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
)

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
			// Every call fails: a new pod's first pass, which lists
			// nothing, fails to create its sandbox, then to list what
			// the failed create may have left.
			for range 5 {
				h.rt.InjectError("ListPodSandbox", status.Error(codes.Unavailable, "connection refused"))
				h.rt.InjectError("RunPodSandbox", status.Error(codes.Unavailable, "connection refused"))
			}
			_, err := h.node.Apply(h.ctx, enginetest.Pod(), nil, nil, nil)
			if err == nil || errors.Is(err, errdefs.ErrRuntimeUnavailable) != classify {
				t.Errorf("Apply with the runtime away: %v; want an error, wrapping ErrRuntimeUnavailable: %v", err, classify)
			}
		})
	}
}
