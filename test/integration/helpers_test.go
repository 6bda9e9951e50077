//go:build integration

package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	cri "k8s.io/cri-api/pkg/apis"

	"github.com/podsync/podsync/engine/enginetest"
)

// criRuntime joins the CRI runtime and image clients into an
// enginetest.Runtime.
type criRuntime struct {
	cri.RuntimeService
	cri.ImageManagerService
}

var _ enginetest.Runtime = (*criRuntime)(nil)

// Close closes both clients.
func (r *criRuntime) Close(ctx context.Context) error {
	return errors.Join(r.RuntimeService.Close(ctx), r.ImageManagerService.Close(ctx))
}

// newRuntime connects to the package's containerd and closes the
// connections when the test ends.
func newRuntime(t *testing.T) enginetest.Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rs, err := inst.RuntimeService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	is, err := inst.ImageService(ctx)
	if err != nil {
		_ = rs.Close(ctx)
		t.Fatal(err)
	}
	rt := &criRuntime{RuntimeService: rs, ImageManagerService: is}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

// testContext is the context of one integration test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// poll calls cond every 20 ms until it returns true or an error, or ctx ends.
func poll(ctx context.Context, cond func() (bool, error)) error {
	return wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) { return cond() })
}
