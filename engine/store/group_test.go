package store

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/errdefs"
)

// queueWrites holds s.mu, as a commit in progress does, while n writers
// queue; it returns once all n wait, with a func that lets them go and
// waits for their results.
func queueWrites(t *testing.T, s *Store, n int, write func(i int) error) func() []error {
	t.Helper()
	s.mu.Lock()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = write(i) })
		// One at a time, so the queue's order is i's.
		for queued := 0; queued <= i; {
			s.qmu.Lock()
			queued = len(s.queue)
			s.qmu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}
	return func() []error {
		s.mu.Unlock()
		wg.Wait()
		return errs
	}
}

// TestConcurrentWritesShareACommit: writes queued while a commit runs are
// committed together, in queue order, with the revisions one by one
// commits would have given them.
func TestConcurrentWritesShareACommit(t *testing.T) {
	s := openTest(t, Options{})
	const n = 8
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = testPod("ns", fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid-%d", i)))
	}
	w, err := s.Watch(testCtx(t), s.Revision())
	if err != nil {
		t.Fatal(err)
	}
	groups := s.groups
	release := queueWrites(t, s, n, func(i int) error {
		_, err := s.Put(PodRecord{Pod: pods[i]})
		return err
	})
	for i, err := range release() {
		if err != nil {
			t.Errorf("Put %d: %v", i, err)
		}
	}
	s.mu.Lock()
	got := s.groups - groups
	s.mu.Unlock()
	if got != 1 {
		t.Errorf("%d writes queued during a commit took %d commits, want 1", n, got)
	}
	for i, p := range pods {
		rec, err := s.Get(p.UID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.ModRevision != int64(i+1) {
			t.Errorf("pod %d has revision %d, want %d (queue order)", i, rec.ModRevision, i+1)
		}
	}
	// A Put logs no entry: the first a watcher sees is the Append's, at
	// the revision after the group's.
	if rev := mustAppend(t, s, event(pods[0], "After")); rev != n+1 {
		t.Errorf("next revision %d, want %d", rev, n+1)
	}
	e := <-w.Events()
	if e.Revision != n+1 {
		t.Errorf("watcher's first entry at revision %d, want %d", e.Revision, n+1)
	}
}

// TestFailedWriteLeavesItsGroupAlone: a write that fails in a group fails
// alone; the others commit as they would have one by one, the failed one
// leaves nothing behind.
func TestFailedWriteLeavesItsGroupAlone(t *testing.T) {
	s, a, b := openTwoPods(t)
	rev := s.Revision()
	boom := errors.New("boom")
	release := queueWrites(t, s, 3, func(i int) error {
		switch i {
		case 1:
			return s.update(func(tx *bolt.Tx, st *txState) error {
				// Changes the store, then fails: all of it must go.
				if _, err := st.appendEntry(tx, event(a, "Lost")); err != nil {
					return err
				}
				return boom
			})
		case 0:
			_, err := s.Append(event(a, "First"))
			return err
		default:
			_, err := s.Append(event(b, "Third"))
			return err
		}
	})
	errs := release()
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], boom) {
		t.Fatalf("errors %v, want nil, boom, nil", errs)
	}
	entries, err := s.Since(rev)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range entries {
		reasons = append(reasons, fmt.Sprintf("%d %s", e.Revision, e.Event.Reason))
	}
	if want := []string{fmt.Sprintf("%d First", rev+1), fmt.Sprintf("%d Third", rev+2)}; !slices.Equal(reasons, want) {
		t.Errorf("log after the group: %v, want %v", reasons, want)
	}
}

// TestWritesAfterCloseFail: writes queued when the store closes fail with
// errdefs.ErrStoreClosed.
func TestWritesAfterCloseFail(t *testing.T) {
	s := openTest(t, Options{})
	p := testPod("ns", "a", "uid-a")
	release := queueWrites(t, s, 2, func(int) error {
		_, err := s.Put(PodRecord{Pod: p})
		return err
	})
	s.closed = true // as Close does, under s.mu
	errs := release()
	s.mu.Lock()
	s.closed = false // let the cleanup's Close run
	s.mu.Unlock()
	for i, err := range errs {
		if !errors.Is(err, errdefs.ErrStoreClosed) {
			t.Errorf("write %d: %v, want errdefs.ErrStoreClosed", i, err)
		}
	}
}
