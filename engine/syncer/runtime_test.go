package syncer_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/syncer"
)

func TestDialRuntimeWithoutRuntime(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	endpoint := "unix://" + filepath.Join(t.TempDir(), "absent.sock")
	rt, err := syncer.DialRuntime(ctx, endpoint, 200*time.Millisecond)
	if err == nil {
		_ = rt.Close(ctx)
		t.Fatal("DialRuntime to an absent socket succeeded")
	}
	if !errors.Is(err, errdefs.ErrRuntimeUnavailable) {
		t.Errorf("DialRuntime: %v, want ErrRuntimeUnavailable", err)
	}
}
