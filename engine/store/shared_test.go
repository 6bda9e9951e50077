package store

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/errdefs"
)

// TestGetByNameSharedFollowsWrites: the shared record of a pod is the one
// ListShared returns, reused until the pod's bytes change (a status, a
// spec, a deletion mark), redacted, and not found once the pod is deleted.
func TestGetByNameSharedFollowsWrites(t *testing.T) {
	s := openTest(t, Options{})
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	get := func() *PodRecord {
		t.Helper()
		rec, err := s.GetByNameShared("default", "web")
		if err != nil {
			t.Fatalf("GetByNameShared: %v", err)
		}
		return rec
	}
	a := get()
	if b := get(); b != a {
		t.Error("two GetByNameShared of an unchanged pod decoded it twice")
	}
	if recs, _, err := s.ListShared(Filter{}); err != nil || len(recs) != 1 || recs[0] != a {
		t.Errorf("ListShared = %v, %v: want the record GetByNameShared returned", recs, err)
	}
	if !a.SecretsRedacted {
		t.Error("shared record not redacted")
	}

	if _, err := s.Append(StatusChange(RefOf(pod), &corev1.PodStatus{Phase: corev1.PodRunning})); err != nil {
		t.Fatal(err)
	}
	b := get()
	if b == a || b.Pod.Status.Phase != corev1.PodRunning {
		t.Errorf("after a status change: phase %q, same record %v", b.Pod.Status.Phase, b == a)
	}
	next := pod.DeepCopy()
	next.Spec.Containers[0].Image = "busybox:1.37"
	mustPut(t, s, next)
	c := get()
	if c == b || c.Pod.Spec.Containers[0].Image != "busybox:1.37" {
		t.Errorf("after a spec change: image %q, same record %v", c.Pod.Spec.Containers[0].Image, c == b)
	}
	if _, err := s.MarkDeleting("uid-1", nil); err != nil {
		t.Fatal(err)
	}
	if d := get(); d == c || !d.Deleting {
		t.Errorf("after MarkDeleting: deleting %v, same record %v", d.Deleting, d == c)
	}

	if _, err := s.Delete("uid-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetByNameShared("default", "web"); !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("GetByNameShared after Delete: %v, want errdefs.ErrPodNotFound", err)
	}
}
