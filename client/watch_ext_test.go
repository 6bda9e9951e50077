package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/server"
)

// watching is a Watch running in the background, collecting what it
// delivers.
type watching struct {
	t    *testing.T
	ctx  context.Context
	ch   chan *podsyncv1.WatchPodsResponse
	stop context.CancelFunc
	// done is closed when Watch returned err.
	done chan struct{}
	err  error
	// all are the messages read by next so far.
	all []*podsyncv1.WatchPodsResponse
}

func startWatch(t *testing.T, c *client.Client, req *podsyncv1.WatchPodsRequest) *watching {
	t.Helper()
	ctx := testContext(t)
	wctx, stop := context.WithCancel(ctx)
	w := &watching{t: t, ctx: ctx, ch: make(chan *podsyncv1.WatchPodsResponse, 4096), done: make(chan struct{}), stop: stop}
	go func() {
		defer close(w.done)
		w.err = c.Watch(wctx, req, func(m *podsyncv1.WatchPodsResponse) error {
			select {
			case w.ch <- m:
				return nil
			case <-wctx.Done():
				return wctx.Err()
			}
		})
	}()
	t.Cleanup(func() {
		stop()
		<-w.done
	})
	return w
}

// until reads delivered messages until one satisfies pred, and returns it.
func (w *watching) until(what string, pred func(*podsyncv1.WatchPodsResponse) bool) *podsyncv1.WatchPodsResponse {
	w.t.Helper()
	for {
		select {
		case m := <-w.ch:
			w.all = append(w.all, m)
			if pred(m) {
				return m
			}
		case <-w.done:
			w.t.Fatalf("Watch returned %v while waiting for %s", w.err, what)
		case <-w.ctx.Done():
			w.t.Fatalf("no %s; got %s", what, describe(w.all))
		}
	}
}

// end stops the watch and returns its error.
func (w *watching) end() error {
	w.stop()
	<-w.done
	return w.err
}

func isStatus(name string) func(*podsyncv1.WatchPodsResponse) bool {
	return func(m *podsyncv1.WatchPodsResponse) bool { return m.GetPod().GetName() == name && m.GetStatus() != nil }
}

func isEvent(name string) func(*podsyncv1.WatchPodsResponse) bool {
	return func(m *podsyncv1.WatchPodsResponse) bool { return m.GetPod().GetName() == name && m.GetEvent() != nil }
}

func isSynced(m *podsyncv1.WatchPodsResponse) bool { return m.GetSynced() != nil }

func isDeleted(name string) func(*podsyncv1.WatchPodsResponse) bool {
	return func(m *podsyncv1.WatchPodsResponse) bool {
		return m.GetPod().GetName() == name && m.GetDeleted() != nil
	}
}

// describe renders messages as "revision:kind:pod" for comparison.
func describe(ms []*podsyncv1.WatchPodsResponse) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		kind := "status"
		switch {
		case m.GetEvent() != nil:
			kind = "event " + m.GetEvent().GetReason()
		case m.GetDeleted() != nil:
			kind = "deleted"
		case m.GetSynced() != nil:
			kind = "synced"
		}
		out = append(out, fmt.Sprintf("%d:%s:%s", m.GetRevision(), kind, m.GetPod().GetName()))
	}
	return out
}

// replay reads a plain WatchPodsStream after since up to and including
// revision last.
func replay(t *testing.T, c *client.Client, since, last int64) []*podsyncv1.WatchPodsResponse {
	t.Helper()
	var out []*podsyncv1.WatchPodsResponse
	errEnough := errors.New("enough")
	err := c.WatchPods(testContext(t), &podsyncv1.WatchPodsRequest{SinceRevision: since}, func(m *podsyncv1.WatchPodsResponse) error {
		out = append(out, m)
		if m.GetRevision() >= last {
			return errEnough
		}
		return nil
	})
	if !errors.Is(err, errEnough) {
		t.Fatalf("replay: %v", err)
	}
	return out
}

// TestWatchResumes: streams cut (with UNAVAILABLE, SLOW_CONSUMER, or a
// clean end) after live changes are resumed after the last revision
// delivered: Watch delivers exactly what one uncut stream would.
func TestWatchResumes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cutErr error
	}{
		{"unavailable", nil},
		{"slow consumer", server.SlowConsumerError(0)},
		{"clean end", errCleanEnd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDaemon(t)
			d.faults.setCutErr(tc.cutErr)
			c := d.client(t, client.WithRetry(0, time.Millisecond))
			syncPod(t, c, "", "a", nil)

			w := startWatch(t, c, &podsyncv1.WatchPodsRequest{})
			w.until("a's initial status", isStatus("a"))
			list, err := c.ListPods(testContext(t), &podsyncv1.ListPodsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			r0 := list.GetRevision()

			// Cut each stream once it has delivered a live event, which
			// ends its initial list.
			syncPod(t, c, "", "b", nil)
			w.until("an event of b", isEvent("b"))
			d.faults.cut()
			syncPod(t, c, "", "c", nil)
			w.until("an event of c", isEvent("c"))
			d.faults.cut()
			deletePod(t, c, "", "a")
			w.until("a's deletion", isDeleted("a"))
			d.faults.cut()
			deletePod(t, c, "", "c")
			last := w.until("c's deletion", isDeleted("c"))
			if err := w.end(); !errors.Is(err, context.Canceled) {
				t.Errorf("Watch after cancel: %v, want context.Canceled", err)
			}

			var live []*podsyncv1.WatchPodsResponse
			for _, m := range w.all {
				if m.GetRevision() > r0 {
					live = append(live, m)
				}
			}
			want := describe(replay(t, c, r0, last.GetRevision()))
			if got := describe(live); !slices.Equal(got, want) {
				t.Errorf("Watch delivered\n%q\nwant what one stream delivers\n%q", got, want)
			}
			reqs := d.faults.watchRequests()
			if n := d.faults.cutCount(); n < 3 || len(reqs) < 4 {
				t.Errorf("%d cuts, %d streams: want 3 and 4", n, len(reqs))
			}
			for i, r := range reqs[1 : len(reqs)-1] { // the last is the replay
				if r.GetSinceRevision() <= r0 {
					t.Errorf("stream %d resumed after %d, before the live changes", i+1, r.GetSinceRevision())
				}
			}
		})
	}
}

// TestWatchRelistsOnCompaction: when the revision to resume after is
// compacted, Watch lists again: the pod deleted meanwhile is reported
// deleted, the others' statuses are delivered at the list's revision, and
// the watch goes on from there.
func TestWatchRelistsOnCompaction(t *testing.T) {
	d := newDaemon(t)
	c := d.client(t, client.WithRetry(0, time.Millisecond))
	syncPod(t, c, "", "a", nil)
	resB := syncPod(t, c, "", "b", nil)

	w := startWatch(t, c, &podsyncv1.WatchPodsRequest{})
	w.until("a's initial status", isStatus("a"))
	w.until("b's initial status", isStatus("b"))
	syncPod(t, c, "", "c", nil)
	w.until("an event of c", isEvent("c"))

	// Disconnect the watch, delete b and compact the history while it is
	// away, then let it back.
	d.faults.setRefuse(errCut, 0)
	d.faults.cut()
	deletePod(t, c, "", "b")
	syncPod(t, c, "", "d", nil)
	if err := d.Store.Compact(d.Store.Revision()); err != nil {
		t.Fatal(err)
	}
	streams := len(d.faults.watchRequests())
	d.faults.setRefuse(nil, 0)

	del := w.until("b's deletion", isDeleted("b"))
	if del.GetPod().GetUid() != resB.GetPod().GetUid() || del.GetRevision() < d.Store.CompactRevision() {
		t.Errorf("deletion %v: want b's uid %s, at the list's revision", del, resB.GetPod().GetUid())
	}
	for _, name := range []string{"a", "c", "d"} {
		m := w.until(name+"'s listed status", isStatus(name))
		if m.GetRevision() != del.GetRevision() {
			t.Errorf("%s's status at %d, the deletion at %d: want both at the list's", name, m.GetRevision(), del.GetRevision())
		}
	}
	if m := w.until("synced after the list", isSynced); m.GetRevision() != del.GetRevision() || m.GetPod() != nil {
		t.Errorf("synced %v: want it at the list's revision %d, with no pod", m, del.GetRevision())
	}
	deletePod(t, c, "", "a")
	if m := w.until("a's deletion", isDeleted("a")); m.GetRevision() <= del.GetRevision() {
		t.Errorf("a deleted at %d, not after the list at %d", m.GetRevision(), del.GetRevision())
	}
	reqs := d.faults.watchRequests()
	var resumed bool
	for _, r := range reqs[streams:] {
		resumed = resumed || r.GetSinceRevision() == del.GetRevision()
	}
	if !resumed {
		t.Errorf("no stream resumed after the list's revision %d: %v", del.GetRevision(), reqs[streams:])
	}
	if err := w.end(); !errors.Is(err, context.Canceled) {
		t.Errorf("Watch: %v", err)
	}
}

// TestWatchDeliversSynced: the initial list ends with synced at the
// list's revision, even when that is the revision of the last pod listed,
// and changes follow it.
func TestWatchDeliversSynced(t *testing.T) {
	d := newDaemon(t)
	c := d.client(t)
	syncPod(t, c, "", "a", nil)
	syncPod(t, c, "", "b", nil)
	listedAt := d.Store.Revision()
	w := startWatch(t, c, &podsyncv1.WatchPodsRequest{})
	synced := w.until("synced", isSynced)
	if got, want := describe(w.all), []string{"status:a", "status:b", fmt.Sprintf("%d:synced:", listedAt)}; len(got) != 3 ||
		!strings.HasSuffix(got[0], want[0]) || !strings.HasSuffix(got[1], want[1]) || got[2] != want[2] {
		t.Errorf("delivered %v: want a's and b's statuses, then %s", got, want[2])
	}
	syncPod(t, c, "", "c", nil)
	if m := w.until("c's status", isStatus("c")); m.GetRevision() <= synced.GetRevision() {
		t.Errorf("c's status at %d, not after synced at %d", m.GetRevision(), synced.GetRevision())
	}
}

// TestWatchRelistsWhenInitialListBreaks: a stream cut inside its initial
// list cannot be resumed by revision; Watch lists again and every pod's
// status is delivered.
func TestWatchRelistsWhenInitialListBreaks(t *testing.T) {
	d := newDaemon(t)
	c := d.client(t, client.WithRetry(0, time.Millisecond))
	// Created last, a has the highest revision and is listed first: a
	// plain resume after a's revision would miss b and c.
	for _, name := range []string{"c", "b", "a"} {
		syncPod(t, c, "", name, nil)
	}
	d.faults.setCutAfter(1)
	w := startWatch(t, c, &podsyncv1.WatchPodsRequest{})
	first := w.until("a's initial status", isStatus("a"))
	b := w.until("b's status", isStatus("b"))
	d.faults.setCutAfter(0)
	if b.GetRevision() < first.GetRevision() {
		t.Errorf("b's status at %d before a's at %d: want the list's revision", b.GetRevision(), first.GetRevision())
	}
	w.until("c's status", isStatus("c"))
	deletePod(t, c, "", "b")
	w.until("b's deletion", isDeleted("b"))
	if err := w.end(); !errors.Is(err, context.Canceled) {
		t.Errorf("Watch: %v", err)
	}
	reqs := d.faults.watchRequests()
	if len(reqs) < 2 || reqs[0].GetSinceRevision() != 0 || reqs[1].GetSinceRevision() < b.GetRevision() {
		t.Errorf("streams %v: want one from 0, then one after the list", reqs)
	}
}

// TestWatchEnds: Watch returns fn's error as it is, and errors retrying
// cannot cure at once.
func TestWatchEnds(t *testing.T) {
	d := newDaemon(t)
	c := d.client(t)
	syncPod(t, c, "", "web", nil)
	errStop := errors.New("stop")
	if err := c.Watch(testContext(t), &podsyncv1.WatchPodsRequest{}, func(*podsyncv1.WatchPodsResponse) error { return errStop }); err != errStop { //nolint:errorlint // returned as it is
		t.Errorf("Watch with a failing fn: %v", err)
	}
	err := c.Watch(testContext(t), &podsyncv1.WatchPodsRequest{LabelSelector: "app in (("}, func(*podsyncv1.WatchPodsResponse) error { return nil })
	wantError(t, err, codes.InvalidArgument, client.ReasonInvalidSpec, "ErrInvalidArgument")
	if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, new(*client.Error)) {
		t.Errorf("Watch with a bad selector: %v", err)
	}
}
