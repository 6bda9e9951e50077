package prober

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const period = 10 * time.Second

func TestInitialResults(t *testing.T) {
	h := newHarness(t)
	delayed := func(p *corev1.Probe) *corev1.Probe { p.InitialDelaySeconds = 100; return p }
	pod := newPod("u1",
		corev1.Container{Name: "app", LivenessProbe: delayed(execProbe("live")), ReadinessProbe: delayed(execProbe("ready"))},
		corev1.Container{Name: "slow", StartupProbe: delayed(execProbe("startup")), LivenessProbe: execProbe("live"), ReadinessProbe: execProbe("ready")},
		corev1.Container{Name: "plain"},
	)
	h.m.Sync(pod, []RunningContainer{running("app", "c1"), running("slow", "c2"), running("plain", "c3")})
	// app: liveness and readiness wait for their initial delay; slow: only
	// its startup probe runs, after its delay; plain has no worker.
	h.settle(3)

	got := h.m.Results("u1")
	want := Results{
		Liveness:  map[string]Result{"c1": Success, "c2": Success},
		Readiness: map[string]Result{"c1": Failure, "c2": Failure},
		Startup:   map[string]Result{"c2": Unknown},
	}
	if !equalResults(got, want) {
		t.Fatalf("Results = %+v, want %+v", got, want)
	}
	h.noUpdate()
	if n := h.exec.count("c1", "live") + h.exec.count("c2", "startup"); n != 0 {
		t.Fatalf("%d probes ran before their initial delay", n)
	}
	if got := h.m.Results("other"); got.Liveness != nil || got.Readiness != nil || got.Startup != nil {
		t.Fatalf("Results of an unknown pod = %+v, want empty", got)
	}
}

func equalResults(a, b Results) bool {
	eq := func(x, y map[string]Result) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || w != v {
				return false
			}
		}
		return true
	}
	return eq(a.Liveness, b.Liveness) && eq(a.Readiness, b.Readiness) && eq(a.Startup, b.Startup)
}

func TestInitialDelay(t *testing.T) {
	h := newHarness(t)
	p := execProbe("ready")
	p.InitialDelaySeconds = 5
	pod := newPod("u1", corev1.Container{Name: "app", ReadinessProbe: p})
	h.m.Sync(pod, []RunningContainer{running("app", "c1")})
	h.settle(1)

	h.step(4*time.Second, 1)
	if n := h.exec.count("c1", "ready"); n != 0 {
		t.Fatalf("probed %d times 4 s into a 5 s initial delay", n)
	}
	h.step(time.Second, 1)
	if n := h.exec.count("c1", "ready"); n != 1 {
		t.Fatalf("probed %d times at the end of the initial delay, want 1", n)
	}
	h.wantUpdate("c1", Readiness, Success)

	// Then every period, counted from the first probe.
	h.step(period-time.Second, 1)
	if n := h.exec.count("c1", "ready"); n != 1 {
		t.Fatalf("probed %d times before the period ended, want 1", n)
	}
	h.step(time.Second, 1)
	if n := h.exec.count("c1", "ready"); n != 2 {
		t.Fatalf("probed %d times after one period, want 2", n)
	}

	// An instance whose delay has passed already is probed at once.
	h.clk.Step(time.Minute)
	p2 := execProbe("other")
	p2.InitialDelaySeconds = 5
	pod2 := newPod("u2", corev1.Container{Name: "app", ReadinessProbe: p2})
	h.m.Sync(pod2, []RunningContainer{{Name: "app", ID: "c2", StartedAt: t0.Add(30 * time.Second), PodIP: "127.0.0.1"}})
	h.settle(2)
	if n := h.exec.count("c2", "other"); n != 1 {
		t.Fatalf("probed %d times, want 1 at once", n)
	}
}

func TestThresholds(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1",
		corev1.Container{Name: "app", ReadinessProbe: withThresholds(execProbe("ready"), 2, 3)},
		corev1.Container{Name: "side", LivenessProbe: withThresholds(execProbe("live"), 1, 3)},
	)
	h.exec.set("live", errExit1)
	h.m.Sync(pod, []RunningContainer{running("app", "c1"), running("side", "c2")})
	h.settle(2) // first probes ran: ready 1 success, live 1 failure

	h.wantResult("u1", Readiness, "c1", Failure)
	h.noUpdate()

	h.step(period, 2) // ready 2 successes: Success; live 2 failures
	h.wantUpdate("c1", Readiness, Success)
	h.wantResult("u1", Liveness, "c2", Success)
	h.noUpdate()

	// A success in between starts the failure count again.
	h.exec.set("live", nil)
	h.step(period, 2)
	h.exec.set("live", errExit1)
	h.step(period, 2)
	h.step(period, 2)
	h.wantResult("u1", Liveness, "c2", Success)
	h.noUpdate()

	// The third failure in a row fails liveness; the worker stops there.
	h.exec.set("ready", errExit1)
	h.step(period, 1)
	h.wantUpdate("c2", Liveness, Failure)
	h.step(period, 1)
	h.noUpdate() // readiness: two failures of three
	h.step(period, 1)
	h.wantUpdate("c1", Readiness, Failure)
	h.wantResult("u1", Readiness, "c1", Failure)

	// One success is not enough to be ready again with successThreshold 2.
	h.exec.set("ready", nil)
	h.step(period, 1)
	h.noUpdate()
	h.step(period, 1)
	h.wantUpdate("c1", Readiness, Success)
}

func TestUpdatesOnlyOnChange(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", corev1.Container{Name: "app",
		ReadinessProbe: withThresholds(execProbe("ready"), 1, 1),
		LivenessProbe:  withThresholds(execProbe("live"), 1, 1),
	})
	h.m.Sync(pod, []RunningContainer{running("app", "c1")})
	h.settle(2)
	// Liveness passing keeps its initial Success: nothing to report.
	h.wantUpdate("c1", Readiness, Success)
	h.noUpdate()
	for range 3 {
		h.step(period, 2)
		h.noUpdate()
	}
	h.exec.set("ready", errExit1)
	h.step(period, 2)
	h.wantUpdate("c1", Readiness, Failure)
	h.step(period, 2)
	h.noUpdate()
	if got := h.exec.count("c1", "ready"); got != 6 {
		t.Fatalf("readiness probed %d times, want 6", got)
	}
}

func TestStartupGatesLivenessAndReadiness(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", corev1.Container{Name: "app",
		StartupProbe:   withThresholds(execProbe("startup"), 1, 10),
		LivenessProbe:  execProbe("live"),
		ReadinessProbe: execProbe("ready"),
	})
	h.exec.set("startup", errExit1)
	h.m.Sync(pod, []RunningContainer{running("app", "c1")})
	h.settle(1)
	for range 3 {
		h.step(period, 1)
	}
	if n := h.exec.count("c1", "startup"); n != 4 {
		t.Fatalf("startup probed %d times, want 4", n)
	}
	if n := h.exec.count("c1", "live") + h.exec.count("c1", "ready"); n != 0 {
		t.Fatalf("liveness and readiness probed %d times before startup passed", n)
	}
	h.wantResult("u1", Startup, "c1", Unknown)
	h.wantResult("u1", Liveness, "c1", Success)
	h.wantResult("u1", Readiness, "c1", Failure)
	h.noUpdate()

	// Startup passes: its worker ends, readiness and liveness start at once.
	h.exec.set("startup", nil)
	h.step(period, 2)
	h.wantUpdate("c1", Startup, Success)
	h.wantUpdate("c1", Readiness, Success)
	if n := h.exec.count("c1", "live"); n != 1 {
		t.Fatalf("liveness probed %d times after startup passed, want 1", n)
	}
	for range 3 {
		h.step(period, 2)
	}
	if n := h.exec.count("c1", "startup"); n != 5 {
		t.Fatalf("startup probed %d times, want 5: never again once passed", n)
	}
	h.wantResult("u1", Startup, "c1", Success)

	// The same instance synced again does not start its startup probe
	// again.
	h.m.Sync(pod, []RunningContainer{running("app", "c1")})
	h.step(period, 2)
	if n := h.exec.count("c1", "startup"); n != 5 {
		t.Fatalf("startup probed %d times after a Sync, want 5", n)
	}
}

func TestStartupFailureIsFinal(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", corev1.Container{Name: "app",
		StartupProbe:  withThresholds(execProbe("startup"), 1, 2),
		LivenessProbe: execProbe("live"),
	})
	h.exec.set("startup", errExit1)
	h.m.Sync(pod, []RunningContainer{running("app", "c1")})
	h.settle(1)
	h.clk.Step(period)
	h.wantUpdate("c1", Startup, Failure)
	h.settle(0)
	h.step(10*period, 0)
	if n := h.exec.count("c1", "startup"); n != 2 {
		t.Fatalf("startup probed %d times, want 2", n)
	}
	if n := h.exec.count("c1", "live"); n != 0 {
		t.Fatalf("liveness probed %d times after startup failed", n)
	}
	h.wantResult("u1", Startup, "c1", Failure)
	h.wantResult("u1", Liveness, "c1", Success)
}

func TestLivenessFailureSticksUntilRestart(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", corev1.Container{Name: "app", LivenessProbe: withThresholds(execProbe("live"), 1, 1)})
	h.exec.set("live", errExit1)
	h.m.Sync(pod, []RunningContainer{running("app", "c1")})
	h.wantUpdate("c1", Liveness, Failure)
	h.settle(0)

	// Probing stopped; the result stays, through later Syncs of the same
	// instance, even when the probe would pass now.
	h.exec.set("live", nil)
	h.m.Sync(pod, []RunningContainer{running("app", "c1")})
	h.step(5*period, 0)
	if n := h.exec.count("c1", "live"); n != 1 {
		t.Fatalf("liveness probed %d times, want 1: on hold after failing", n)
	}
	h.wantResult("u1", Liveness, "c1", Failure)

	// The restarted container (new ID) has a fresh worker and result.
	restarted := running("app", "c2")
	restarted.StartedAt = h.clk.Now()
	h.m.Sync(pod, []RunningContainer{restarted})
	h.settle(1)
	if _, ok := h.result("u1", Liveness, "c1"); ok {
		t.Fatal("the old instance's result is still there")
	}
	h.wantResult("u1", Liveness, "c2", Success)
	if n := h.exec.count("c2", "live"); n != 1 {
		t.Fatalf("new instance probed %d times, want 1", n)
	}
	h.noUpdate()
}

func TestReadinessFalseAfterManagerRestart(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", corev1.Container{Name: "app", ReadinessProbe: execProbe("ready")})
	h.m.Sync(pod, []RunningContainer{running("app", "c1")})
	h.wantUpdate("c1", Readiness, Success)
	h.settle(1)
	h.m.Stop()

	// A new Manager (podsync restarted) adopts the running container: not
	// ready until a probe passes, and that probe comes within one period.
	h.clk.Step(time.Hour)
	h.m = h.newManager(Options{})
	h.m.Sync(pod, []RunningContainer{running("app", "c1")})
	h.wantResult("u1", Readiness, "c1", Failure)
	eventually(t, "the adopted instance's first probe scheduled", func() bool {
		return h.exec.count("c1", "ready") == 2 || h.clk.Waiters() == 1
	})
	h.clk.Step(period)
	h.wantUpdate("c1", Readiness, Success)
	h.settle(1)
	if n := h.exec.count("c1", "ready"); n < 2 {
		t.Fatalf("probed %d times in all, want 2", n)
	}
}

func TestSyncAddsAndRemovesWorkers(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1",
		corev1.Container{Name: "a", LivenessProbe: execProbe("live"), ReadinessProbe: execProbe("ready")},
		corev1.Container{Name: "b", ReadinessProbe: execProbe("ready")},
	)
	always := corev1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "sidecar", RestartPolicy: &always, ReadinessProbe: execProbe("ready")},
		{Name: "init", ReadinessProbe: execProbe("ready")}, // not restartable: never probed
	}
	all := []RunningContainer{running("a", "ca"), running("b", "cb"), running("sidecar", "cs"), running("init", "ci"), running("unknown", "cu")}
	h.m.Sync(pod, all)
	h.settle(4)
	for range 3 { // readiness of a, b and sidecar; liveness stays Success
		h.update()
	}
	if n := h.exec.count("ci", "ready"); n != 0 {
		t.Fatalf("a plain init container was probed")
	}

	// b stops running: its worker ends and its result goes.
	h.m.Sync(pod, []RunningContainer{running("a", "ca"), running("sidecar", "cs")})
	h.settle(3)
	if _, ok := h.result("u1", Readiness, "cb"); ok {
		t.Fatal("result of a container that no longer runs is still there")
	}
	h.step(period, 3)
	if n := h.exec.count("cb", "ready"); n != 1 {
		t.Fatalf("removed container probed %d times, want 1", n)
	}

	// A second pod is independent.
	pod2 := newPod("u2", corev1.Container{Name: "a", ReadinessProbe: execProbe("ready")})
	h.m.Sync(pod2, []RunningContainer{running("a", "c2")})
	h.settle(4)
	h.update()

	// Nothing runs any more.
	h.m.Sync(pod, nil)
	h.settle(1)
	if got := h.m.Results("u1"); got.Liveness != nil || got.Readiness != nil {
		t.Fatalf("Results = %+v, want empty", got)
	}
	h.m.RemovePod("u2")
	h.settle(0)
	if got := h.m.Results("u2"); got.Readiness != nil {
		t.Fatalf("Results = %+v after RemovePod, want empty", got)
	}
	h.noUpdate()
}

func TestStopAbortsProbesAndClosesUpdates(t *testing.T) {
	h := newHarness(t)
	h.exec.block["hang"] = true
	pod := newPod("u1",
		corev1.Container{Name: "a", LivenessProbe: execProbe("hang")},
		corev1.Container{Name: "b", ReadinessProbe: execProbe("ready")},
	)
	h.m.Sync(pod, []RunningContainer{running("a", "c1"), running("b", "c2")})
	eventually(t, "the hanging probe to start", func() bool { return h.exec.count("c1", "hang") == 1 })

	h.m.Stop()
	if n := h.m.live.Load(); n != 0 {
		t.Fatalf("%d workers alive after Stop", n)
	}
	// The readiness update may have been sent before Stop; then the
	// channel is closed.
	for range h.m.Updates() {
	}
	if got := h.m.Results("u1"); got.Liveness != nil || got.Readiness != nil {
		t.Fatalf("Results = %+v after Stop, want empty", got)
	}
	h.m.Sync(pod, []RunningContainer{running("a", "c1")})
	if n := h.m.live.Load(); n != 0 {
		t.Fatalf("Sync after Stop started %d workers", n)
	}
	h.m.Stop()
}

func TestProbeErrorsAreNotResults(t *testing.T) {
	h := newHarness(t)
	p := execProbe("ready")
	p.Exec = nil
	p.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromString("missing")}
	pod := newPod("u1", corev1.Container{Name: "a",
		ReadinessProbe: p,
		LivenessProbe: withThresholds(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("missing")},
		}}, 1, 1),
	})
	h.m.Sync(pod, []RunningContainer{running("a", "c1")})
	h.settle(2)
	h.step(period, 2)
	h.wantResult("u1", Readiness, "c1", Failure)
	h.wantResult("u1", Liveness, "c1", Success)
	h.noUpdate()
}

// TestEveryFailureIsAnEvent: as the kubelet's prober records one, every
// failed probe run is an Unhealthy event on Events — below the failure
// threshold too — but the failure that changes the result, which its
// Update carries; a passing probe is none.
func TestEveryFailureIsAnEvent(t *testing.T) {
	h := newHarness(t)
	pod := newPod("u1", corev1.Container{Name: "app", ReadinessProbe: withThresholds(execProbe("ready"), 1, 3)})
	h.exec.set("ready", errExit1)
	h.m.Sync(pod, []RunningContainer{running("app", "c1")})
	h.settle(1) // the first failure: readiness starts as Failure, no change
	for range 4 {
		h.step(period, 1)
	}
	h.noUpdate()
	var evs []Event
	for len(h.m.Events()) > 0 {
		evs = append(evs, <-h.m.Events())
	}
	if len(evs) != 5 {
		t.Fatalf("%d events for 5 failed probes, want 5: %+v", len(evs), evs)
	}
	for _, e := range evs {
		if e.PodUID != "u1" || e.ContainerName != "app" || e.Reason != EventUnhealthy || !strings.HasPrefix(e.Message, "Readiness probe failed: ") {
			t.Errorf("event %+v: want app's Unhealthy \"Readiness probe failed: …\"", e)
		}
	}
	h.exec.set("ready", nil)
	h.step(period, 1)
	h.wantUpdate("c1", Readiness, Success)
	if n := len(h.m.Events()); n != 0 {
		t.Errorf("a passing probe made %d events", n)
	}
}
