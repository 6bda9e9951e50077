package vk

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/internal/testing/testdaemon"
)

// TestMain checks for leaks, but for the worker opencensus starts at init
// (virtual-kubelet imports it): a package-level goroutine of a library.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// TestTakeLease: podsync-vk holds the node's lease while it serves it, and
// learns when another holder takes the node over.
func TestTakeLease(t *testing.T) {
	d := testdaemon.New(t, testdaemon.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ps, err := client.New(ctx, d.Target)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ps.Close() }()
	lost, err := takeLease(ctx, ps, 3*time.Second, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Node.Leases().Get(ctx)
	if err != nil || !l.Held() || l.Epoch != 1 {
		t.Fatalf("lease while serving: %+v, %v", l, err)
	}
	other, err := client.New(ctx, d.Target)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	if _, err := other.AcquireLease(ctx, time.Minute); err != nil { // a standby of the same identity
		t.Fatal(err)
	}
	select {
	case err := <-lost:
		if !errors.Is(err, client.ErrLeaseSuperseded) {
			t.Fatalf("lost: %v, want ErrLeaseSuperseded", err)
		}
	case <-ctx.Done():
		t.Fatal("the takeover went unnoticed")
	}
}
