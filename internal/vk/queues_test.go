package vk

import (
	"testing"
	"time"
)

// An item's first try goes at once, its retries back off, and success
// (Forget) makes the next first try immediate again; many items in a burst
// are never held back as a whole.
func TestRetryLimiter(t *testing.T) {
	l := newRetryLimiter()
	want := []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	for i, w := range want {
		if got := l.When("default/web"); got != w {
			t.Errorf("try %d: wait %s, want %s", i+1, got, w)
		}
	}
	l.Forget("default/web")
	if got := l.When("default/web"); got != 0 {
		t.Errorf("first try after success: wait %s, want none", got)
	}
	for i := range 1000 {
		if got := l.When(i); got != 0 {
			t.Fatalf("item %d of a burst of 1000: wait %s, want none", i, got)
		}
	}
}
