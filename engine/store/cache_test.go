package store

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestListCacheFollowsWrites: records read through the decoded cache see
// every write (status, spec, deletion and a new incarnation) and are the
// caller's to change.
func TestListCacheFollowsWrites(t *testing.T) {
	s := openTest(t, Options{})
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	list := func() *PodRecord {
		t.Helper()
		recs, _, err := s.List(Filter{})
		if err != nil || len(recs) != 1 {
			t.Fatalf("List = %d records, %v", len(recs), err)
		}
		return recs[0]
	}
	first := list()
	first.Pod.Spec.Containers[0].Image = "changed-by-the-caller"
	first.Pod.Labels["app"] = "changed"
	if got := list(); got.Pod.Spec.Containers[0].Image != "busybox:1.36" || got.Pod.Labels["app"] != "web" {
		t.Fatalf("a caller's change reached the next List: %v", got.Pod)
	}

	if _, err := s.Append(StatusChange(RefOf(pod), &corev1.PodStatus{Phase: corev1.PodRunning})); err != nil {
		t.Fatal(err)
	}
	if got := list(); got.Pod.Status.Phase != corev1.PodRunning {
		t.Errorf("after a status change: phase %q", got.Pod.Status.Phase)
	}
	if got, err := s.GetByName("default", "web"); err != nil || got.Pod.Status.Phase != corev1.PodRunning {
		t.Errorf("GetByName after a status change: %v, %v", got, err)
	}

	next := pod.DeepCopy()
	next.Spec.Containers[0].Image = "busybox:1.37"
	mustPut(t, s, next)
	if got := list(); got.Pod.Spec.Containers[0].Image != "busybox:1.37" {
		t.Errorf("after a spec change: image %q", got.Pod.Spec.Containers[0].Image)
	}

	if _, err := s.Delete("uid-1"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, testPod("default", "web", "uid-1"))
	if got := list(); got.Pod.Spec.Containers[0].Image != "busybox:1.36" || got.Pod.Status.Phase != "" {
		t.Errorf("a new incarnation read as the old one: %v", got.Pod)
	}
}

// TestListSharedFollowsWrites: shared records are reused until the pod's
// bytes change, and concurrent readers and writers do not race.
func TestListSharedFollowsWrites(t *testing.T) {
	s := openTest(t, Options{})
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	shared := func() *PodRecord {
		t.Helper()
		recs, _, err := s.ListShared(Filter{})
		if err != nil || len(recs) != 1 {
			t.Fatalf("ListShared = %d records, %v", len(recs), err)
		}
		return recs[0]
	}
	a, b := shared(), shared()
	if a != b {
		t.Error("two ListShared of an unchanged pod decoded it twice")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			_, _, _ = s.ListShared(Filter{})
		}
	}()
	for i := range 50 {
		phase := corev1.PodPending
		if i%2 == 1 {
			phase = corev1.PodRunning
		}
		if _, err := s.Append(StatusChange(RefOf(pod), &corev1.PodStatus{Phase: phase})); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if got := shared(); got.Pod.Status.Phase != corev1.PodRunning || got == a {
		t.Errorf("after status changes: phase %q, same record %v", got.Pod.Status.Phase, got == a)
	}
}
