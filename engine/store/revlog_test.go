package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podsync/podsync/engine/errdefs"
)

func TestRevisionMonotonicAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	var last int64
	for round := range 3 {
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if s.Revision() != last {
			t.Errorf("round %d: reopened at revision %d, closed at %d", round, s.Revision(), last)
		}
		pod := testPod("default", fmt.Sprintf("p%d", round), types.UID(fmt.Sprint("uid-", round)))
		rec, err := s.Put(PodRecord{Pod: pod})
		if err != nil {
			t.Fatalf("Put: %v", err)
		}
		if rec.ModRevision <= last {
			t.Errorf("round %d: Put got revision %d after %d", round, rec.ModRevision, last)
		}
		rev, err := s.Append(event(pod, "A"), event(pod, "B"))
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if rev != rec.ModRevision+2 {
			t.Errorf("round %d: Append of two entries after revision %d returned %d", round, rec.ModRevision, rev)
		}
		last = rev
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
}

func TestSinceExactlyOnceAfterReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	s, err := Open(path, Options{Clock: testclock.NewFakePassiveClock(t0)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	a, b := testPod("default", "a", "uid-a"), testPod("default", "b", "uid-b")
	mustPut(t, s, a)
	mustPut(t, s, b)
	var want []string
	for i := range 20 {
		pod := a
		if i%3 == 0 {
			pod = b
		}
		reason := fmt.Sprintf("R%02d", i)
		mustAppend(t, s, event(pod, reason))
		want = append(want, reason)
	}
	all, err := s.Since(0)
	if err != nil {
		t.Fatalf("Since(0): %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openAt(t, path, Options{})
	for _, k := range []int{0, 1, 7, 19, 20} {
		from := int64(0)
		if k > 0 {
			from = all[k-1].Revision
		}
		got, err := s.Since(from)
		if err != nil {
			t.Fatalf("Since(%d): %v", from, err)
		}
		if diff := cmp.Diff(want[k:], reasons(got), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Since(%d) after reopen (-want +got):\n%s", from, diff)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Revision <= got[i-1].Revision {
				t.Errorf("Since(%d): revision %d after %d", from, got[i].Revision, got[i-1].Revision)
			}
		}
		if len(got) > 0 && got[0].Revision <= from {
			t.Errorf("Since(%d) returned revision %d", from, got[0].Revision)
		}
	}
	got, err := s.Since(all[4].Revision)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all[5:], got); diff != "" {
		t.Errorf("entries changed across reopen (-before +after):\n%s", diff)
	}
	if got[0].Pod != RefOf(a) && got[0].Pod != RefOf(b) || !got[0].Time.Equal(t0) || got[0].Event.Type != corev1.EventTypeNormal {
		t.Errorf("entry %+v", got[0])
	}
	if _, err := s.Since(s.Revision() + 1); !errors.Is(err, errdefs.ErrFutureRevision) {
		t.Errorf("Since(future): %v, want errdefs.ErrFutureRevision", err)
	}
	if _, err := s.Since(-1); !errors.Is(err, errdefs.ErrInvalidRecord) {
		t.Errorf("Since(-1): %v, want errdefs.ErrInvalidRecord", err)
	}
}

// TestAppendStatusTimesToTheSecond: the store keeps a status's times to
// the second, as the API's JSON and protobuf keep them: a time within the
// stored one's second is no change, a second later is one.
func TestAppendStatusTimesToTheSecond(t *testing.T) {
	s := openTest(t, Options{})
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	started := time.Date(2026, 12, 7, 3, 4, 5, 0, time.UTC)
	status := func(d time.Duration) Change {
		return StatusChange(RefOf(pod), &corev1.PodStatus{Phase: corev1.PodPending, StartTime: &metav1.Time{Time: started.Add(d)}})
	}
	rev := mustAppend(t, s, status(0))
	if again := mustAppend(t, s, status(999*time.Millisecond)); again != rev {
		t.Errorf("a start time within the same second moved the revision from %d to %d", rev, again)
	}
	if later := mustAppend(t, s, status(time.Second)); later == rev {
		t.Errorf("a start time a second later did not move the revision from %d", rev)
	}
}

func TestAppendStatus(t *testing.T) {
	s := openTest(t, Options{})
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	st := &corev1.PodStatus{Phase: corev1.PodPending}
	rev := mustAppend(t, s, StatusChange(RefOf(pod), st))
	st.Phase = corev1.PodFailed // Append copied it
	rec, err := s.Get("uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Pod.Status.Phase != corev1.PodPending || rec.ModRevision != rev {
		t.Errorf("stored status %q at mod revision %d, want Pending at %d", rec.Pod.Status.Phase, rec.ModRevision, rev)
	}

	// The same status again is dropped; an event is not a pod change.
	if again := mustAppend(t, s, StatusChange(RefOf(pod), &corev1.PodStatus{Phase: corev1.PodPending})); again != rev {
		t.Errorf("unchanged status moved the revision from %d to %d", rev, again)
	}
	evRev := mustAppend(t, s, event(pod, "Pulled"))
	if rec, _ := s.Get("uid-1"); rec.ModRevision != rev {
		t.Errorf("an event moved the mod revision to %d", rec.ModRevision)
	}
	running := mustAppend(t, s, StatusChange(RefOf(pod), &corev1.PodStatus{Phase: corev1.PodRunning}))
	entries, err := s.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{rev, evRev, running}, revisions(entries)); diff != "" {
		t.Errorf("log revisions (-want +got):\n%s", diff)
	}
	if entries[0].Kind != KindStatus || entries[0].Status.Phase != corev1.PodPending || entries[2].Status.Phase != corev1.PodRunning {
		t.Errorf("status entries %+v, %+v", entries[0], entries[2])
	}
}

// TestAppendMixed: one Append of events and statuses of two pods, a
// pod's status changing twice and repeating once: each pod keeps its last
// status at that status's revision, the repeat is dropped, and the log has
// the rest in order.
func TestAppendMixed(t *testing.T) {
	s, a, b := openTwoPods(t)
	base := s.Revision()
	rev := mustAppend(t, s,
		event(a, "Created"),
		StatusChange(RefOf(a), &corev1.PodStatus{Phase: corev1.PodPending}),
		event(b, "Created"),
		StatusChange(RefOf(a), &corev1.PodStatus{Phase: corev1.PodRunning}),
		StatusChange(RefOf(a), &corev1.PodStatus{Phase: corev1.PodRunning}), // unchanged: dropped
		StatusChange(RefOf(b), &corev1.PodStatus{Phase: corev1.PodPending}),
		event(a, "Started"),
	)
	if rev != base+6 {
		t.Errorf("Append returned revision %d, want %d (six entries after %d)", rev, base+6, base)
	}
	for _, want := range []struct {
		uid   types.UID
		phase corev1.PodPhase
		mod   int64
	}{{"uid-a", corev1.PodRunning, base + 4}, {"uid-b", corev1.PodPending, base + 5}} {
		rec, err := s.Get(want.uid)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Pod.Status.Phase != want.phase || rec.ModRevision != want.mod {
			t.Errorf("pod %s: status %q at mod revision %d, want %q at %d", want.uid, rec.Pod.Status.Phase, rec.ModRevision, want.phase, want.mod)
		}
	}
	entries, err := s.Since(base)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		what := string(e.Kind) + " " + e.Pod.Name
		if e.Status != nil {
			what += " " + string(e.Status.Phase)
		}
		if e.Event != nil {
			what += " " + e.Event.Reason
		}
		got = append(got, what)
	}
	want := []string{"Event a Created", "Status a Pending", "Event b Created", "Status a Running", "Status b Pending", "Event a Started"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}

	// A change of a pod not stored fails the whole Append.
	gone := testPod("ns", "gone", "uid-gone")
	if _, err := s.Append(event(a, "Killing"), event(gone, "Killing")); !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("Append with an unknown pod: %v, want ErrPodNotFound", err)
	}
	if s.Revision() != rev {
		t.Errorf("a failed Append moved the revision from %d to %d", rev, s.Revision())
	}
}

// TestStatusKeepsItsSandbox: the sandbox a status was read in is part of
// its entry, on disk too, so a watch resumed later names the sandbox of
// that time; a status without one has none.
func TestStatusKeepsItsSandbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	s := openAt(t, path, Options{})
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	first := StatusChange(RefOf(pod), &corev1.PodStatus{Phase: corev1.PodRunning})
	first.Sandbox = SandboxRef{ID: "sb-0", Attempt: 0}
	second := StatusChange(RefOf(pod), &corev1.PodStatus{Phase: corev1.PodRunning, Message: "again"})
	second.Sandbox = SandboxRef{ID: "sb-1", Attempt: 1}
	bare := StatusChange(RefOf(pod), &corev1.PodStatus{Phase: corev1.PodFailed})
	mustAppend(t, s, first, second, bare)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := openAt(t, path, Options{}).Since(0)
	if err != nil {
		t.Fatal(err)
	}
	var got []SandboxRef
	for _, e := range entries {
		if e.Kind == KindStatus {
			got = append(got, e.Sandbox)
		}
	}
	if diff := cmp.Diff([]SandboxRef{{ID: "sb-0"}, {ID: "sb-1", Attempt: 1}, {}}, got); diff != "" {
		t.Errorf("sandboxes of the status entries (-want +got):\n%s", diff)
	}
}

func TestAppendRejects(t *testing.T) {
	s := openTest(t, Options{})
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	rev := s.Revision()
	ghost := testPod("default", "ghost", "uid-ghost")
	renamed := RefOf(pod)
	renamed.Name = "other"
	tests := []struct {
		name    string
		changes []Change
		want    error
	}{
		{"unknown pod, after a valid change", []Change{event(pod, "Ok"), event(ghost, "Nope")}, errdefs.ErrPodNotFound},
		{"ref names another pod", []Change{EventChange(renamed, Event{Type: corev1.EventTypeNormal, Reason: "X"})}, errdefs.ErrInvalidRecord},
		{"deletion", []Change{{Kind: KindDeleted, Pod: RefOf(pod)}}, errdefs.ErrInvalidRecord},
		{"unknown kind", []Change{{Kind: "Spec", Pod: RefOf(pod)}}, errdefs.ErrInvalidRecord},
		{"no status", []Change{{Kind: KindStatus, Pod: RefOf(pod)}}, errdefs.ErrInvalidRecord},
		{"event type", []Change{EventChange(RefOf(pod), Event{Type: "Error", Reason: "X"})}, errdefs.ErrInvalidRecord},
		{"event reason", []Change{EventChange(RefOf(pod), Event{Type: corev1.EventTypeWarning})}, errdefs.ErrInvalidRecord},
		{"no uid", []Change{EventChange(PodRef{Namespace: "default", Name: "web"}, Event{Type: corev1.EventTypeNormal, Reason: "X"})}, errdefs.ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Append(tt.changes...); !errors.Is(err, tt.want) {
				t.Errorf("Append: %v, want %v", err, tt.want)
			}
		})
	}
	if s.Revision() != rev {
		t.Errorf("failed appends moved the revision from %d to %d", rev, s.Revision())
	}
	if entries, err := s.Since(0); err != nil || len(entries) != 0 {
		t.Errorf("failed appends left %d entries (%v)", len(entries), err)
	}
}

func TestDeleteIsTheLastEntry(t *testing.T) {
	s := openTest(t, Options{})
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	mustAppend(t, s, event(pod, "Killing"))
	rev, err := s.Delete("uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(event(pod, "Late")); !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("Append after Delete: %v, want errdefs.ErrPodNotFound", err)
	}
	entries, err := s.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	last := entries[len(entries)-1]
	if last.Revision != rev || last.Kind != KindDeleted || last.Pod != RefOf(pod) || !last.Time.Equal(t0) {
		t.Errorf("last entry %+v, want the deletion of %s at revision %d", last, RefOf(pod), rev)
	}
}

func TestCompact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	var revs []int64
	for i := range 10 {
		revs = append(revs, mustAppend(t, s, event(pod, fmt.Sprint(i))))
	}
	at := revs[5]
	if err := s.Compact(at); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if err := s.Compact(revs[2]); err != nil {
		t.Errorf("Compact before the compaction point: %v", err)
	}
	if err := s.Compact(s.Revision() + 1); !errors.Is(err, errdefs.ErrFutureRevision) {
		t.Errorf("Compact(future): %v, want errdefs.ErrFutureRevision", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path, Options{})
	if s.CompactRevision() != at {
		t.Errorf("compaction point after reopen %d, want %d", s.CompactRevision(), at)
	}
	_, err = s.Since(at - 1)
	var ce *errdefs.CompactedError
	if !errors.As(err, &ce) || !errors.Is(err, errdefs.ErrCompacted) || ce.CompactRevision != at || ce.Revision != at-1 {
		t.Fatalf("Since(%d): %v, want a errdefs.CompactedError at %d", at-1, err, at)
	}
	got, err := s.Since(at)
	if err != nil {
		t.Fatalf("Since(compaction point): %v", err)
	}
	if diff := cmp.Diff(revs[6:], revisions(got)); diff != "" {
		t.Errorf("Since(compaction point) (-want +got):\n%s", diff)
	}
}

func TestAutoCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	s := openAt(t, path, Options{KeepEntries: 5})
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	var revs []int64
	for i := range 12 {
		revs = append(revs, mustAppend(t, s, event(pod, fmt.Sprint(i))))
	}
	// A batch larger than what is kept keeps its newest entries.
	batch := make([]Change, 7)
	for i := range batch {
		batch[i] = event(pod, fmt.Sprint("b", i))
	}
	last := mustAppend(t, s, batch...)
	for r := last - 6; r <= last; r++ {
		revs = append(revs, r)
	}
	kept := revs[len(revs)-5:]
	wantCompact := revs[len(revs)-6]
	if s.CompactRevision() != wantCompact {
		t.Errorf("compaction point %d, want %d", s.CompactRevision(), wantCompact)
	}
	got, err := s.Since(wantCompact)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(kept, revisions(got)); diff != "" {
		t.Errorf("kept entries (-want +got):\n%s", diff)
	}
	var ce *errdefs.CompactedError
	if _, err := s.Since(0); !errors.As(err, &ce) || ce.CompactRevision != wantCompact {
		t.Errorf("Since(0): %v, want a errdefs.CompactedError at %d", err, wantCompact)
	}
}

func TestConcurrentAppenders(t *testing.T) {
	s := openTest(t, Options{})
	ctx := testCtx(t)
	const writers, each = 6, 25
	pods := make([]*corev1.Pod, writers)
	for i := range pods {
		pods[i] = testPod("default", fmt.Sprint("p", i), types.UID(fmt.Sprint("uid-", i)))
		mustPut(t, s, pods[i])
	}
	w, err := s.Watch(ctx, s.Revision())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			for j := range each {
				ch := event(pods[i], fmt.Sprintf("w%d-%02d", i, j))
				if j%5 == 0 {
					ch = StatusChange(RefOf(pods[i]), &corev1.PodStatus{Phase: corev1.PodRunning, Message: fmt.Sprint(j)})
				}
				if _, err := s.Append(ch); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}
	all, err := s.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != writers*each {
		t.Fatalf("%d entries, want %d", len(all), writers*each)
	}
	next := map[string]int{}
	for i, e := range all {
		if i > 0 && e.Revision != all[i-1].Revision+1 {
			t.Errorf("revision %d after %d", e.Revision, all[i-1].Revision)
		}
		// Each writer's entries are in its own order.
		n := next[string(e.Pod.UID)]
		want := fmt.Sprintf("w%s-%02d", e.Pod.UID[len("uid-"):], n)
		if e.Kind == KindEvent && e.Event.Reason != want || e.Kind == KindStatus && e.Status.Message != fmt.Sprint(n) {
			t.Errorf("entry %d of %s: %+v, want #%d", n, e.Pod.UID, e.Change, n)
		}
		next[string(e.Pod.UID)] = n + 1
	}
	got := receive(ctx, t, w, len(all))
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("the watcher saw another history (-log +watched):\n%s", diff)
	}
}

// TestAutoCompactionByBytes: the revision log is bounded by the bytes of
// its entries as well as their count, oldest first; the newest entry
// stays even when it alone is over the bound; the byte count survives a
// reopen; a watcher resuming from a compacted revision gets ErrCompacted.
func TestAutoCompactionByBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	const keep = 8 << 10
	s := openAt(t, path, Options{KeepBytes: keep})
	pod := testPod("default", "web", "uid-1")
	mustPut(t, s, pod)
	big := func(i int, n int) Change {
		return EventChange(RefOf(pod), Event{Type: corev1.EventTypeNormal, Reason: fmt.Sprint("R", i), Message: strings.Repeat("x", n)})
	}
	var revs []int64
	for i := range 20 {
		revs = append(revs, mustAppend(t, s, big(i, 1<<10)))
	}
	check := func(s *Store, what string) []Entry {
		t.Helper()
		got, err := s.Since(s.CompactRevision())
		if err != nil {
			t.Fatalf("%s: Since(compaction point): %v", what, err)
		}
		var n int64
		for _, e := range got {
			data, err := json.Marshal(&e)
			if err != nil {
				t.Fatal(err)
			}
			n += int64(len(data))
		}
		if n > keep && len(got) > 1 {
			t.Errorf("%s: the log holds %d bytes in %d entries, want at most %d", what, n, len(got), keep)
		}
		if s.logBytes() != n {
			t.Errorf("%s: the store counts %d bytes, its entries hold %d", what, s.logBytes(), n)
		}
		return got
	}
	got := check(s, "after 20 entries of 1 KiB")
	if len(got) < 5 || len(got) > 8 || got[len(got)-1].Revision != revs[19] {
		t.Errorf("kept revisions %v, want the newest 5 to 8 ending at %d", revisions(got), revs[19])
	}
	var ce *errdefs.CompactedError
	if _, err := s.Since(revs[0]); !errors.As(err, &ce) {
		t.Errorf("Since(%d) = %v, want a CompactedError", revs[0], err)
	}
	ctx := testCtx(t)
	w, err := s.Watch(ctx, revs[0])
	if err == nil {
		for range w.Events() {
		}
		err = w.Err()
	}
	if !errors.Is(err, errdefs.ErrCompacted) {
		t.Errorf("a watcher resuming from compacted revision %d: %v, want ErrCompacted", revs[0], err)
	}

	// One entry over the bound alone: it stays, everything older goes.
	last := mustAppend(t, s, big(99, 2*keep))
	got = check(s, "after an entry over the bound")
	if len(got) != 1 || got[0].Revision != last {
		t.Errorf("kept revisions %v, want only %d", revisions(got), last)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{KeepBytes: keep})
	check(s, "after a reopen")
	mustAppend(t, s, big(100, 1<<10))
	got = check(s, "after a reopen and an append")
	if len(got) != 1 {
		t.Errorf("kept revisions %v, want only the newest", revisions(got))
	}
	// An explicit Compact keeps the count of bytes true too.
	var small []int64
	for i := range 3 {
		small = append(small, mustAppend(t, s, big(200+i, 100)))
	}
	if err := s.Compact(small[1]); err != nil {
		t.Fatal(err)
	}
	if got = check(s, "after Compact"); len(got) != 1 || got[0].Revision != small[2] {
		t.Errorf("kept revisions %v after Compact(%d), want only %d", revisions(got), small[1], small[2])
	}
}
