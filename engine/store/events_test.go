package store

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"
)

// TestEventsAreCountedAsTheKubeletCountsThem: a repeat of an event (same
// pod, container, type, reason and message) is the next occurrence of its
// series — the same name and first time, a count one higher, its own
// time — recorded as an entry of its own for watchers; Events lists the
// newest occurrence of each series, oldest first; another message, pod or
// container is another series.
func TestEventsAreCountedAsTheKubeletCountsThem(t *testing.T) {
	clk := testclock.NewFakePassiveClock(t0)
	s := openTest(t, Options{Clock: clk})
	web, db := RefOf(mustPut(t, s, testPod("shop", "web", "uid-web")).Pod), RefOf(mustPut(t, s, testPod("shop", "db", "uid-db")).Pod)
	unhealthy := Event{Type: corev1.EventTypeWarning, Reason: "Unhealthy", Container: "main", Message: "Readiness probe failed: "}
	appendAt := func(d time.Duration, ref PodRef, ev Event) {
		t.Helper()
		clk.SetTime(t0.Add(d))
		if _, err := s.Append(EventChange(ref, ev)); err != nil {
			t.Fatal(err)
		}
	}
	appendAt(0, web, unhealthy)
	appendAt(time.Second, web, Event{Type: corev1.EventTypeNormal, Reason: "Started", Container: "main", Message: "Started container main"})
	appendAt(2*time.Second, web, unhealthy)
	appendAt(3*time.Second, db, unhealthy)
	appendAt(4*time.Second, web, unhealthy)
	other := unhealthy
	other.Container = "sidecar"
	appendAt(5*time.Second, web, other)

	entries, err := s.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	var counts []int32
	for _, e := range entries {
		if e.Kind == KindEvent && e.Pod == web && e.Event.Reason == "Unhealthy" && e.Event.Container == "main" {
			counts = append(counts, e.Event.Count)
			if e.Event.Name != fmt.Sprintf("web.%x", t0.UnixNano()) || !e.Event.FirstTime.Equal(t0) {
				t.Errorf("occurrence %d: name %q, first %v; want the series' (web.%x, %v)", e.Event.Count, e.Event.Name, e.Event.FirstTime, t0.UnixNano(), t0)
			}
		}
	}
	if fmt.Sprint(counts) != "[1 2 3]" {
		t.Errorf("the series' occurrences have counts %v, want [1 2 3]", counts)
	}

	listed, _, err := s.Events(EventFilter{Namespace: "shop", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range listed {
		got = append(got, fmt.Sprintf("%s/%s x%d at %s", e.Event.Reason, e.Event.Container, e.Event.Count, e.Event.Time.Sub(t0)))
	}
	want := "[Started/main x1 at 1s Unhealthy/main x3 at 4s Unhealthy/sidecar x1 at 5s]"
	if fmt.Sprint(got) != want {
		t.Errorf("Events(web) = %v\nwant %v", got, want)
	}
	if all, _, _ := s.Events(EventFilter{}); len(all) != 4 {
		t.Errorf("Events() lists %d series, want 4 (db's Unhealthy is its own)", len(all))
	}
}

// TestEventsAreThrottledAsTheKubeletThrottlesThem: beyond a burst of 25
// events of one pod and type, the correlator's throttle holds events
// back; the count goes on, so the next one written carries every
// occurrence.
func TestEventsAreThrottledAsTheKubeletThrottlesThem(t *testing.T) {
	clk := testclock.NewFakePassiveClock(t0)
	s := openTest(t, Options{Clock: clk, EventBurst: 25})
	web := RefOf(mustPut(t, s, testPod("shop", "web", "uid-web")).Pod)
	ev := Event{Type: corev1.EventTypeWarning, Reason: "Unhealthy", Container: "main", Message: "Readiness probe failed: "}
	for range 30 {
		if _, err := s.Append(EventChange(web, ev)); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := s.Since(0)
	if n := countEvents(entries); n != 25 {
		t.Errorf("%d of 30 events written, want the burst of 25", n)
	}
	clk.SetTime(t0.Add(5 * time.Minute))
	if _, err := s.Append(EventChange(web, ev)); err != nil {
		t.Fatal(err)
	}
	listed, _, _ := s.Events(EventFilter{UID: web.UID})
	if len(listed) != 1 || listed[0].Event.Count != 31 {
		t.Fatalf("after the throttle refilled: %d series, count %d; want 1 series of 31", len(listed), listed[0].Event.Count)
	}
}

func countEvents(entries []Entry) int {
	n := 0
	for _, e := range entries {
		if e.Kind == KindEvent {
			n++
		}
	}
	return n
}
