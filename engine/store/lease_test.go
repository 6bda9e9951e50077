package store

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/errdefs"
)

// TestPutIfChecksRevisionAndUID: a pod's write under a revision or uid
// precondition lands only when the stored pod meets it, and a refused
// write leaves the pod as it was, with the current revision and uid in
// the error.
func TestPutIfChecksRevisionAndUID(t *testing.T) {
	s := openTest(t, Options{})
	pod := testPod("shop", "web", "u1")

	// "Does not exist": the first create lands, a second is refused.
	rec, err := s.PutIf(PodRecord{Pod: pod}, Conditions{Revision: ptr.To[int64](0)})
	if err != nil {
		t.Fatalf("create if absent: %v", err)
	}
	again := pod.DeepCopy()
	again.Labels["v"] = "2"
	_, err = s.PutIf(PodRecord{Pod: again}, Conditions{Revision: ptr.To[int64](0)})
	wantPrecondition(t, err, errdefs.RevisionMismatch, rec.ModRevision, "u1")

	// A status append moves the revision: a write at the old one is
	// refused, at the new one it lands.
	mustAppend(t, s, event(pod, "Started"))
	statusRev := mustAppendStatus(t, s, pod)
	_, err = s.PutIf(PodRecord{Pod: again}, Conditions{Revision: &rec.ModRevision})
	wantPrecondition(t, err, errdefs.RevisionMismatch, statusRev, "u1")
	if got, _ := s.GetByName("shop", "web"); got.Pod.Labels["v"] != "" {
		t.Fatalf("refused write stored labels %v", got.Pod.Labels)
	}
	updated, err := s.PutIf(PodRecord{Pod: again}, Conditions{Revision: &statusRev, UID: "u1"})
	if err != nil || updated.Pod.Labels["v"] != "2" {
		t.Fatalf("write at the current revision: %v, labels %v", err, updated.Pod.Labels)
	}

	// Another incarnation's uid is refused.
	_, err = s.PutIf(PodRecord{Pod: again}, Conditions{UID: "u0"})
	wantPrecondition(t, err, errdefs.UIDMismatch, updated.ModRevision, "u1")

	// A revision on a pod that does not exist is refused with revision 0.
	_, err = s.PutIf(PodRecord{Pod: testPod("shop", "db", "u2")}, Conditions{Revision: ptr.To[int64](5)})
	wantPrecondition(t, err, errdefs.RevisionMismatch, 0, "")

	// MarkDeletingIf checks the same way.
	_, err = s.MarkDeletingIf("u1", nil, Conditions{Revision: &rec.ModRevision})
	wantPrecondition(t, err, errdefs.RevisionMismatch, updated.ModRevision, "u1")
	if _, err := s.MarkDeletingIf("u1", nil, Conditions{Revision: &updated.ModRevision}); err != nil {
		t.Fatalf("mark deleting at the current revision: %v", err)
	}
}

// TestPutWithObjectsIsAllOrNothing: a failed pod precondition stores none
// of the request's objects either.
func TestPutWithObjectsIsAllOrNothing(t *testing.T) {
	s := openTest(t, Options{})
	pod := testPod("shop", "web", "u1")
	_, _, err := s.PutWithObjects(PodRecord{Pod: pod}, Conditions{Revision: ptr.To[int64](9)},
		[]ObjectPut{{ConfigMap: testCM("cfg", "1")}}, nil)
	if !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Fatalf("PutWithObjects at a wrong revision: %v, want ErrPreconditionFailed", err)
	}
	if _, err := s.GetObject(ObjectRef{Kind: KindConfigMap, Namespace: "shop", Name: "cfg"}); !errors.Is(err, errdefs.ErrObjectNotFound) {
		t.Fatalf("the refused request's ConfigMap is stored: %v", err)
	}
	rec, res, err := s.PutWithObjects(PodRecord{Pod: pod}, Conditions{Revision: ptr.To[int64](0)},
		[]ObjectPut{{ConfigMap: testCM("cfg", "1")}}, nil)
	if err != nil || len(res) != 1 || !res[0].Created {
		t.Fatalf("PutWithObjects: %v, %+v", err, res)
	}
	if rec.ModRevision <= res[0].Record.ModRevision {
		t.Errorf("pod revision %d not after its object's %d", rec.ModRevision, res[0].Record.ModRevision)
	}
}

// TestLeaseEpochsFenceWrites: each acquisition bumps the epoch; a write
// under an older epoch is refused, even one that arrives after the new
// holder wrote; with Require, a write needs the epoch of a held lease;
// the epoch survives a restart of the store.
func TestLeaseEpochsFenceWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	clk := testclock.NewFakePassiveClock(t0)
	s, err := Open(path, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.AcquireLease("cn:a", 10*time.Second)
	if err != nil || a.Epoch != 1 || a.Holder != "cn:a" {
		t.Fatalf("first acquisition: %+v, %v", a, err)
	}
	if _, err := s.AcquireLease("cn:b", 10*time.Second); !errors.Is(err, errdefs.ErrLeaseHeld) {
		t.Fatalf("acquisition of a held lease: %v, want ErrLeaseHeld", err)
	}
	pod := testPod("shop", "web", "u1")
	if _, err := s.PutIf(PodRecord{Pod: pod}, Conditions{Fence: &Fence{Epoch: a.Epoch}}); err != nil {
		t.Fatalf("write under the current epoch: %v", err)
	}
	clk.SetTime(t0.Add(11 * time.Second)) // a's lease expires: b takes over
	b, err := s.AcquireLease("cn:b", 10*time.Second)
	if err != nil || b.Epoch != 2 {
		t.Fatalf("takeover: %+v, %v", b, err)
	}
	if _, err := s.RenewLease("cn:a", a.Epoch, 0); !errors.Is(err, errdefs.ErrLeaseSuperseded) {
		t.Fatalf("renewal by the old holder: %v, want ErrLeaseSuperseded", err)
	}
	late := pod.DeepCopy()
	late.Labels["from"] = "a"
	_, err = s.PutIf(PodRecord{Pod: late}, Conditions{Fence: &Fence{Epoch: a.Epoch}})
	var le *errdefs.LeaseError
	if !errors.Is(err, errdefs.ErrLeaseSuperseded) || !errors.As(err, &le) || le.Current != 2 || le.Holder != "cn:b" {
		t.Fatalf("late write of the old epoch: %v, want ErrLeaseSuperseded by epoch 2 of cn:b", err)
	}
	if _, err := s.MarkDeletingIf("u1", nil, Conditions{Fence: &Fence{Epoch: a.Epoch}}); !errors.Is(err, errdefs.ErrLeaseSuperseded) {
		t.Fatalf("late deletion of the old epoch: %v", err)
	}
	if _, err := s.PutObjectsFenced([]ObjectPut{{ConfigMap: testCM("cfg", "1")}}, nil, &Fence{Epoch: a.Epoch}); !errors.Is(err, errdefs.ErrLeaseSuperseded) {
		t.Fatalf("late object write of the old epoch: %v", err)
	}
	if err := s.Fenced(&Fence{Epoch: a.Epoch}, func() error { t.Error("fenced function ran"); return nil }); !errors.Is(err, errdefs.ErrLeaseSuperseded) {
		t.Fatalf("late fenced call of the old epoch: %v", err)
	}
	// Required: no epoch, or an epoch never granted, is refused.
	for _, f := range []Fence{{Require: true}, {Epoch: 7}} {
		if _, err := s.PutIf(PodRecord{Pod: late}, Conditions{Fence: &f}); !errors.Is(err, errdefs.ErrLeaseRequired) {
			t.Errorf("write under %+v: %v, want ErrLeaseRequired", f, err)
		}
	}
	if _, err := s.PutIf(PodRecord{Pod: late}, Conditions{Fence: &Fence{Epoch: b.Epoch, Require: true}}); err != nil {
		t.Fatalf("write under the current epoch, required: %v", err)
	}
	if released, err := s.ReleaseLease("cn:b", b.Epoch); err != nil || !released {
		t.Fatalf("release: %v, %v", released, err)
	}
	if released, err := s.ReleaseLease("cn:b", b.Epoch); err != nil || released {
		t.Fatalf("second release: %v, %v; want false, nil", released, err)
	}
	if _, err := s.PutIf(PodRecord{Pod: late}, Conditions{Fence: &Fence{Epoch: b.Epoch, Require: true}}); !errors.Is(err, errdefs.ErrLeaseRequired) {
		t.Fatalf("required write under a released lease: %v, want ErrLeaseRequired", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path, Options{Clock: clk})
	l, err := s.Lease()
	if err != nil || l.Epoch != 2 || l.Held() {
		t.Fatalf("lease after reopening: %+v, %v; want epoch 2, released", l, err)
	}
	c, err := s.AcquireLease("cn:a", time.Second)
	if err != nil || c.Epoch != 3 {
		t.Fatalf("acquisition after reopening: %+v, %v; want epoch 3", c, err)
	}
}

func wantPrecondition(t *testing.T, err error, kind errdefs.PreconditionKind, rev int64, uid string) {
	t.Helper()
	var pe *errdefs.PreconditionError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v, want a *PreconditionError", err)
	}
	if pe.Kind != kind || pe.Revision != rev || pe.UID != uid {
		t.Fatalf("precondition error %+v, want kind %d, revision %d, uid %q", pe, kind, rev, uid)
	}
}

func mustAppendStatus(t *testing.T, s *Store, pod *corev1.Pod) int64 {
	t.Helper()
	st := pod.Status.DeepCopy()
	st.Phase = corev1.PodRunning
	return mustAppend(t, s, StatusChange(RefOf(pod), st))
}
