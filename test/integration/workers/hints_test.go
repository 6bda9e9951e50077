//go:build integration

package workers_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/metrics"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/watch"
	"github.com/podsync/podsync/internal/ctrdevents"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// tappedEvents is containerd's event service as podsyncd follows it,
// which says whether its stream opened and, when deaf, drops every
// event (a subscription that misses them all).
type tappedEvents struct {
	watch.RuntimeEvents
	deaf     bool
	opened   atomic.Bool
	received atomic.Int64
}

func (e *tappedEvents) Follow(ctx context.Context, connected func(), fn func(watch.RuntimeEvent)) error {
	return e.RuntimeEvents.Follow(ctx, func() {
		e.opened.Store(true)
		connected()
	}, func(ev watch.RuntimeEvent) {
		e.received.Add(1)
		if !e.deaf {
			fn(ev)
		}
	})
}

// deafCRI is a runtime whose CRI container event stream opens and
// delivers nothing (containerd 2.x missing every event).
type deafCRI struct{ syncer.Runtime }

func (r deafCRI) GetContainerEvents(ctx context.Context, _ chan *runtimeapi.ContainerEventResponse, connected func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	events := make(chan *runtimeapi.ContainerEventResponse, 16)
	errc := make(chan error, 1)
	go func() { errc <- r.Runtime.GetContainerEvents(ctx, events, connected) }()
	for {
		select {
		case <-events:
		case err := <-errc:
			return err
		}
	}
}

// hintsBy returns podsync_runtime_hints_total of each source.
func hintsBy(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != metrics.MetricRuntimeHints {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestRuntimeHintSources: a container killed from outside wakes its
// pod's worker through the runtime's events — containerd's event service
// on 1.6, which has no CRI events, CRI events on 2.x — long before a
// relist (a minute away) could, and podsync_runtime_hints_total says
// which; with every event missed, the relist repairs it.
func TestRuntimeHintSources(t *testing.T) {
	// deaf: every event is missed; relist: the relist period while
	// events stream.
	for _, tc := range []struct {
		name   string
		deaf   bool
		relist time.Duration
	}{
		{"an exit from outside is an event", false, time.Minute},
		{"relist repairs a missed exit", true, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := ctrdevents.Dial(inst.Endpoint())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = src.Close() })
			tap := &tappedEvents{RuntimeEvents: src, deaf: tc.deaf}
			reg := prometheus.NewRegistry()
			m, err := metrics.New(reg, metrics.Options{})
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, func(o *engine.NodeOptions) {
				o.Metrics, o.RuntimeEvents, o.EventedRelistPeriod = m, tap, tc.relist
				if tc.deaf {
					o.Runtime = deafCRI{o.Runtime}
				}
			})
			pod := e.newPod("", localcritest.Busybox("app"))
			e.apply(pod)
			e.eventually("running", func() bool { return e.running(pod, "app") != nil })
			if inst.Flavour() == localcri.Containerd16 {
				e.eventually("containerd's event stream open", tap.opened.Load)
			}
			before := hintsBy(t, reg)
			received := tap.received.Load()

			first := e.running(pod, "app")
			localcritest.Crictl(t, inst, "stop", "--timeout", "0", first.ID)
			ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
			defer cancel()
			restarted := func() bool {
				i := e.running(pod, "app")
				return i != nil && i.ID != first.ID && i.RestartCount == 1
			}
			for !restarted() {
				select {
				case <-ctx.Done():
					t.Fatalf("not restarted within 30 s of the stop; hints %v", hintsBy(t, reg))
				case <-time.After(20 * time.Millisecond):
				}
			}
			after := hintsBy(t, reg)
			woke := func(source string) bool { return after[source] > before[source] }
			t.Logf("%s: hints before the stop %v, after the restart %v", inst.Flavour(), before, after)

			// The event service delivers on both flavours; podsync follows
			// it only where CRI has no events.
			if got := tap.received.Load(); inst.Flavour() == localcri.Containerd16 && got == received {
				t.Error("containerd 1.6: no event of containerd's event service for the stop")
			}
			switch {
			case tc.deaf:
				if !woke("relist") {
					t.Error("every event missed, yet no relist woke the worker")
				}
				if woke("cri_events") || woke("containerd_events") {
					t.Errorf("events woke the worker though all were missed: %v → %v", before, after)
				}
			case inst.Flavour() == localcri.Containerd16:
				if !woke("containerd_events") {
					t.Errorf("containerd 1.6: the worker was not woken by containerd's events: %v → %v", before, after)
				}
				if after["cri_events"] != 0 {
					t.Errorf("containerd 1.6 has no CRI events, yet %v", after)
				}
			default:
				if !woke("cri_events") {
					t.Errorf("containerd 2.x: the worker was not woken by CRI events: %v → %v", before, after)
				}
				if tap.opened.Load() || after["containerd_events"] != 0 {
					t.Errorf("containerd 2.x: containerd's events followed though CRI streams them: %v", after)
				}
			}
		})
	}
}
