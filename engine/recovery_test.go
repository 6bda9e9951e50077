package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/store"
)

// TestLostStoreKeepsPodsRunning: a node whose store has no history (a
// missing or replaced file opens as a new store) on a runtime that holds
// podsync's pods refuses to start with ErrStoreLost, naming the store and
// the pods, and touches nothing; with RemoveOrphans it removes them.
func TestLostStoreKeepsPodsRunning(t *testing.T) {
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	h.apply(pod)
	before := h.view(pod)
	h.stop()

	run := func(removeOrphans bool) error {
		t.Helper()
		st, err := store.Open(filepath.Join(t.TempDir(), "podsync.db"), store.Options{Clock: h.clock})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = st.Close() }()
		opts := h.opts
		opts.Store, opts.RemoveOrphans, opts.Logger = st, removeOrphans, zaptest.NewLogger(t)
		n, err := engine.NewNode(opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx) }()
		if !removeOrphans {
			return <-done
		}
		h.eventually("the orphans removed", func() bool { return len(h.view(pod).Sandboxes) == 0 })
		cancel()
		return <-done
	}

	err := run(false)
	if !errors.Is(err, errdefs.ErrStoreLost) || !strings.Contains(err.Error(), "shop/web") || !strings.Contains(err.Error(), "--remove-orphans") {
		t.Fatalf("Run on a lost store = %v, want ErrStoreLost naming shop/web and the flag", err)
	}
	after := h.view(pod)
	if len(after.Sandboxes) != 1 || after.Sandboxes[0].ID != before.Sandboxes[0].ID || after.Sandboxes[0].State != plan.SandboxReady {
		t.Errorf("sandboxes after the refusal %v, want %s ready, untouched", after.Sandboxes, before.Sandboxes[0].ID)
	}
	for _, c := range after.Containers {
		if c.State != plan.ContainerRunning {
			t.Errorf("container %s %s after the refusal, want running", c.Name, c.State)
		}
	}
	if err := run(true); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Run with RemoveOrphans = %v", err)
	}
}
