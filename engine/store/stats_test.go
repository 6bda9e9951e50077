package store

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestStatsCountCommitsAndSyncs: each commit counts its writes and its
// two syncs, writes that share a commit count one commit, and a commit
// that grows the file counts one sync more.
func TestStatsCountCommitsAndSyncs(t *testing.T) {
	s := openTest(t, Options{})
	if got := s.Stats(); got != (Stats{}) {
		t.Fatalf("a new store: %+v, want nothing counted", got)
	}
	pod := testPod("ns", "a", "uid-a")
	mustPut(t, s, pod)
	mustAppend(t, s, StatusChange(RefOf(pod), &corev1.PodStatus{Phase: corev1.PodRunning}))
	if got := s.Stats(); got.Writes != 2 || got.Commits != 2 || got.Syncs < 4 {
		t.Errorf("a Put and an Append: %+v, want 2 writes, 2 commits, at least 4 syncs", got)
	}

	// Eight writes queued while a commit runs share one.
	before := s.Stats()
	release := queueWrites(t, s, 8, func(i int) error {
		_, err := s.Put(PodRecord{Pod: testPod("ns", fmt.Sprintf("q%d", i), types.UID(fmt.Sprintf("uid-q%d", i)))})
		return err
	})
	for i, err := range release() {
		if err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
	if got := s.Stats(); got.Writes != before.Writes+8 || got.Commits != before.Commits+1 {
		t.Errorf("eight queued writes: %+v → %+v, want 8 writes in 1 commit", before, got)
	}

	// Records larger than the file's free pages grow it: one sync more
	// per growing commit, never fewer than two a commit.
	before = s.Stats()
	big := testPod("ns", "big", "uid-big")
	big.Annotations = map[string]string{"blob": strings.Repeat("x", 256<<10)}
	mustPut(t, s, big)
	got := s.Stats()
	if got.Commits != before.Commits+1 || got.Syncs != before.Syncs+3 {
		t.Errorf("a commit that grew the file: %+v → %+v, want 1 commit and 3 syncs", before, got)
	}
}
