package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// openTest opens a store in a fresh directory and closes it at the end of
// the test.
func openTest(t *testing.T, opts Options) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "podsync.db"), opts)
}

func openAt(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = testclock.NewFakePassiveClock(t0)
	}
	if opts.EventBurst == 0 {
		// The tests of the log append events as cheap entries; the
		// throttle's own tests ask for it.
		opts.EventBurst = -1
	}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func testPod(ns, name string, uid types.UID) *corev1.Pod {
	grace := int64(30)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sleep", "3600"}}},
		},
	}
}

func mustPut(t *testing.T, s *Store, pod *corev1.Pod) *PodRecord {
	t.Helper()
	rec, err := s.Put(PodRecord{Pod: pod})
	if err != nil {
		t.Fatalf("Put %s: %v", RefOf(pod), err)
	}
	return rec
}

func mustAppend(t *testing.T, s *Store, changes ...Change) int64 {
	t.Helper()
	rev, err := s.Append(changes...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return rev
}

func event(pod *corev1.Pod, reason string) Change {
	return EventChange(RefOf(pod), Event{Type: corev1.EventTypeNormal, Reason: reason, Message: "m " + reason})
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// receive reads n entries from w, failing the test when ctx ends first or
// the watcher ends.
func receive(ctx context.Context, t *testing.T, w *Watcher, n int) []Entry {
	t.Helper()
	var out []Entry
	for len(out) < n {
		select {
		case e, ok := <-w.Events():
			if !ok {
				t.Fatalf("watcher ended after %d of %d entries: %v", len(out), n, w.Err())
			}
			out = append(out, e)
		case <-ctx.Done():
			t.Fatalf("received %d of %d entries: %v", len(out), n, ctx.Err())
		}
	}
	return out
}

// drain reads w until it ends and returns what it got.
func drain(ctx context.Context, t *testing.T, w *Watcher) []Entry {
	t.Helper()
	var out []Entry
	for {
		select {
		case e, ok := <-w.Events():
			if !ok {
				return out
			}
			out = append(out, e)
		case <-ctx.Done():
			t.Fatalf("watcher did not end: %v", ctx.Err())
		}
	}
}

func revisions(entries []Entry) []int64 {
	out := make([]int64, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Revision)
	}
	return out
}

func reasons(entries []Entry) []string {
	var out []string
	for _, e := range entries {
		if e.Event != nil {
			out = append(out, e.Event.Reason)
		}
	}
	return out
}

// openTwoPods is a store with pods ns/a and ns/b stored.
func openTwoPods(t *testing.T) (*Store, *corev1.Pod, *corev1.Pod) {
	t.Helper()
	s := openTest(t, Options{})
	a, b := testPod("ns", "a", "uid-a"), testPod("ns", "b", "uid-b")
	mustPut(t, s, a)
	mustPut(t, s, b)
	return s, a, b
}
