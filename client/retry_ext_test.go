package client_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

// TestRetryGetPod: GetPod is retried on UNAVAILABLE as often as WithRetry
// allows, and not at all without it.
func TestRetryGetPod(t *testing.T) {
	d := newDaemon(t)
	syncPod(t, d.client(t), "", "web", nil)
	for _, tc := range []struct {
		name      string
		opts      []client.Option
		fail      int32
		wantCalls int32
		wantErr   bool
	}{
		{"no retry", nil, 1, 1, true},
		{"two failures, three retries", []client.Option{client.WithRetry(3, time.Millisecond)}, 2, 3, false},
		{"three failures, two retries", []client.Option{client.WithRetry(2, time.Millisecond)}, 3, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.faults.failGetPod.Store(tc.fail)
			d.faults.getPodCalls.Store(0)
			t.Cleanup(func() { d.faults.failGetPod.Store(0) })
			resp, err := d.client(t, tc.opts...).GetPod(testContext(t), "", "web")
			if tc.wantErr {
				wantError(t, err, codes.Unavailable, "", "ErrUnavailable")
			} else if err != nil || resp.GetPod().GetMetadata().GetName() != "web" {
				t.Errorf("GetPod: %v %v", resp, err)
			}
			if got := d.faults.getPodCalls.Load(); got != tc.wantCalls {
				t.Errorf("%d calls, want %d", got, tc.wantCalls)
			}
		})
	}
}

// TestRetryNeverRunPods: RunPods fails on the first UNAVAILABLE, even
// with WithRetry.
func TestRetryNeverRunPods(t *testing.T) {
	d := newDaemon(t)
	d.faults.failRunPods.Store(1)
	c := d.client(t, client.WithRetry(5, time.Millisecond))
	req := &podsyncv1.RunPodsRequest{Pods: []*podsyncv1.Pod{syncReq(t, "", "web", nil).GetPod()}}
	res, err := c.RunPods(testContext(t), req, nil)
	wantError(t, err, codes.Unavailable, "", "ErrUnavailable")
	if res != nil || d.faults.runCalls.Load() != 1 {
		t.Errorf("result %v after %d calls, want nil after 1", res, d.faults.runCalls.Load())
	}
	// The next call goes through.
	if res, err = c.RunPods(testContext(t), req, nil); err != nil || !res.OK() {
		t.Errorf("RunPods: %v %v", res, err)
	}
}

// TestRetryWatchPodsSetup: a WatchPods stream refused with UNAVAILABLE is
// opened again.
func TestRetryWatchPodsSetup(t *testing.T) {
	d := newDaemon(t)
	c := d.client(t, client.WithRetry(3, time.Millisecond))
	syncPod(t, c, "", "web", nil)
	d.faults.setRefuse(errCut, 2)
	done := errors.New("done")
	err := c.WatchPods(testContext(t), &podsyncv1.WatchPodsRequest{}, func(*podsyncv1.WatchPodsResponse) error { return done })
	if !errors.Is(err, done) {
		t.Fatalf("WatchPods: %v", err)
	}
	if n := len(d.faults.watchRequests()); n != 3 {
		t.Errorf("%d streams, want 3", n)
	}
	// Without WithRetry, the first refusal is the error.
	d.faults.setRefuse(errCut, 1)
	err = d.client(t).WatchPods(testContext(t), &podsyncv1.WatchPodsRequest{}, func(*podsyncv1.WatchPodsResponse) error { return done })
	wantError(t, err, codes.Unavailable, "", "ErrUnavailable")
}
