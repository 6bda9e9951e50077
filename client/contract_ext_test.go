package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

// TestRetryOnConflict: two read-modify-writes of one pod's labels under
// IfRevision, racing: each either lands or gets ErrConflict, with the
// current revision, and RetryOnConflict makes both land; neither update
// is lost.
func TestRetryOnConflict(t *testing.T) {
	c := newDaemon(t).client(t)
	ctx := testContext(t)
	syncPod(t, c, "", "web", map[string]string{"app": "web"})
	var conflicts atomic.Int32
	update := func(key string) error {
		return client.RetryOnConflict(ctx, func(ctx context.Context) error {
			cur, err := c.GetPod(ctx, "", "web")
			if err != nil {
				return err
			}
			labels := map[string]string{key: "set"}
			for k, v := range cur.GetPod().GetMetadata().GetLabels() {
				labels[k] = v
			}
			req := syncReq(t, "", "web", labels)
			req.Precondition = client.IfRevision(cur.GetRevision())
			_, err = c.SyncPod(ctx, req, nil)
			if errors.Is(err, client.ErrConflict) {
				conflicts.Add(1)
				if rev, ok := client.CurrentRevision(err); !ok || rev <= cur.GetRevision() {
					t.Errorf("conflict reports revision %d (%v), read %d", rev, ok, cur.GetRevision())
				}
			}
			return err
		})
	}
	// A stale write first, by hand: it conflicts and changes nothing.
	cur, err := c.GetPod(ctx, "", "web")
	if err != nil {
		t.Fatal(err)
	}
	stale := syncReq(t, "", "web", map[string]string{"lost": "yes"})
	stale.Precondition = client.IfRevision(cur.GetRevision() - 1)
	if _, err := c.SyncPod(ctx, stale, nil); !errors.Is(err, client.ErrConflict) || !errors.Is(err, client.ErrAborted) {
		t.Fatalf("stale write: %v, want ErrConflict", err)
	}
	errs := make(chan error, 2)
	go func() { errs <- update("a") }()
	go func() { errs <- update("b") }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.GetPod(ctx, "", "web")
	if err != nil {
		t.Fatal(err)
	}
	if l := got.GetPod().GetMetadata().GetLabels(); l["a"] != "set" || l["b"] != "set" || l["lost"] != "" {
		t.Fatalf("labels %v after %d conflicts: want a and b set", l, conflicts.Load())
	}
	create := syncReq(t, "", "web", nil)
	create.Precondition = client.IfNotExists()
	if _, err := c.SyncPod(ctx, create, nil); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("IfNotExists of an existing pod: %v", err)
	}
	if _, err := c.DeletePod(ctx, &podsyncv1.DeletePodRequest{Name: "web", Precondition: client.IfUID("other")}); !errors.Is(err, client.ErrUIDMismatch) {
		t.Fatalf("DeletePod IfUID another: %v", err)
	}
}

// TestKeepLease: KeepLease acquires the lease and makes the client's
// calls carry its epoch; once another acquisition supersedes it, the
// client's writes are refused and KeepLease returns ErrLeaseSuperseded.
func TestKeepLease(t *testing.T) {
	d := newDaemon(t)
	a, b := d.client(t), d.client(t)
	ctx := testContext(t)
	acquired := make(chan *podsyncv1.Lease, 4)
	done := make(chan error, 1)
	go func() { done <- a.KeepLease(ctx, 3*time.Second, func(l *podsyncv1.Lease) { acquired <- l }) }()
	first := <-acquired
	syncPod(t, a, "", "web", nil)
	node, err := b.GetNode(ctx)
	if err != nil || node.GetLease().GetEpoch() != first.GetEpoch() {
		t.Fatalf("GetNode lease %v, %v; want epoch %d", node.GetLease(), err, first.GetEpoch())
	}
	// b is the same identity (root on the socket): a takeover.
	taken, err := b.AcquireLease(ctx, time.Minute)
	if err != nil || taken.GetEpoch() != first.GetEpoch()+1 {
		t.Fatalf("takeover: %v, %v", taken, err)
	}
	if _, err := a.SyncPod(ctx, syncReq(t, "", "web", map[string]string{"from": "a"}), nil); !errors.Is(err, client.ErrLeaseSuperseded) {
		t.Fatalf("write of the superseded holder: %v, want ErrLeaseSuperseded", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, client.ErrLeaseSuperseded) {
			t.Fatalf("KeepLease: %v, want ErrLeaseSuperseded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("KeepLease did not notice the takeover")
	}
	b.UseLeaseEpoch(taken.GetEpoch())
	syncPod(t, b, "", "web", map[string]string{"from": "b"})
}
