package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/metrics"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// grpcCode is what podsyncd passes as MetricsOptions.ErrorCode.
func grpcCode(err error) string { return status.Code(err).String() }

func newMetrics(t *testing.T, opts metrics.Options) (*prometheus.Registry, *metrics.Metrics) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return reg, m
}

// sample returns the sample of the metric family name whose labels are
// exactly labels (name, value pairs), or nil.
func sample(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

// value returns a counter's or gauge's value, 0 if the sample is absent.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	m := sample(t, reg, name, labels...)
	switch {
	case m == nil:
		return 0
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s%v is neither a counter nor a gauge", name, labels)
	return 0
}

// observations returns a histogram's sample count and sum, zero if the
// sample is absent.
func observations(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) (uint64, float64) {
	t.Helper()
	m := sample(t, reg, name, labels...)
	if m == nil {
		return 0, 0
	}
	if m.GetHistogram() == nil {
		t.Fatalf("%s%v is not a histogram", name, labels)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// slowSandboxes steps the fake clock while a sandbox is created, so a
// pass that creates one takes that long.
type slowSandboxes struct {
	syncer.Runtime
	clock *clocktesting.FakeClock
	d     time.Duration
}

func (s *slowSandboxes) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	s.clock.Step(s.d)
	return s.Runtime.RunPodSandbox(ctx, config, handler)
}

func TestMetricsSyncPassesAndSteps(t *testing.T) {
	reg, m := newMetrics(t, metrics.Options{ErrorCode: grpcCode})
	h := syncertest.New(t, func(o *syncer.SyncerOptions) {
		slow := &slowSandboxes{Runtime: o.Runtime, clock: o.Clock.(*clocktesting.FakeClock), d: 1500 * time.Millisecond}
		o.Runtime, o.Images, o.Observer = m.InstrumentRuntime(slow), m.InstrumentImages(o.Images), m
	})
	passes := func(outcome string) (uint64, float64) {
		t.Helper()
		return observations(t, reg, metrics.MetricSyncPassDuration, "outcome", outcome)
	}
	steps := func(action syncer.StepAction, result, reason string) float64 {
		t.Helper()
		return value(t, reg, metrics.MetricSyncSteps, "action", string(action), "result", result, "reason", reason)
	}
	// Every outcome is exported before the first pass.
	for _, o := range []string{metrics.PassSuccess, metrics.PassStepFailed, metrics.PassError, metrics.PassCanceled} {
		if sample(t, reg, metrics.MetricSyncPassDuration, "outcome", o) == nil {
			t.Errorf("outcome %q not exported before the first pass", o)
		}
	}

	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0", "StartContainer app NewSandbox")
	if n, sum := passes(metrics.PassSuccess); n != 1 || sum != 1.5 {
		t.Errorf("success passes: %d observations summing to %gs, want 1 of 1.5s", n, sum)
	}
	if got := steps(syncer.ActionCreatePodSandbox, metrics.StepSuccess, plan.SandboxReasonNone); got != 1 {
		t.Errorf("CreatePodSandbox success NoSandbox = %g, want 1", got)
	}
	if got := steps(syncer.ActionConfigPodSandbox, metrics.StepSuccess, ""); got != 1 {
		t.Errorf("ConfigPodSandbox success = %g, want 1", got)
	}
	if got := steps(syncer.ActionStartContainer, metrics.StepSuccess, plan.ReasonNewSandbox); got != 1 {
		t.Errorf("StartContainer success NewSandbox = %g, want 1", got)
	}
	if n, _ := observations(t, reg, metrics.MetricCRIRequestDuration, "method", "RunPodSandbox", "code", metrics.CodeOK); n != 1 {
		t.Errorf("RunPodSandbox calls recorded: %d, want 1", n)
	}

	// A crash restarts at once, the second waits: a back-off step.
	h.Exit(res, "app", 1)
	res = h.Sync(pod)
	h.Exit(res, "app", 1)
	syncertest.WantSteps(t, h.Sync(pod), "StartContainer app CrashLoopBackOff")
	if got := steps(syncer.ActionStartContainer, metrics.StepBackoff, plan.ReasonCrashLoopBackOff); got != 1 {
		t.Errorf("StartContainer backoff CrashLoopBackOff = %g, want 1", got)
	}
	if got := steps(syncer.ActionStartContainer, metrics.StepSuccess, plan.ReasonExited); got != 1 {
		t.Errorf("StartContainer success Exited = %g, want 1", got)
	}
	if n, _ := passes(metrics.PassSuccess); n != 3 {
		t.Errorf("success passes: %d, want 3 (a back-off is no failure)", n)
	}

	// A refused start fails its step, not the pass.
	h.Clock.Step(plan.DefaultBackoffBase)
	h.RT.InjectError("StartContainer", status.Error(codes.Unavailable, "runtime is restarting"))
	syncertest.FailedStep(t, h.Sync(pod), syncer.ActionStartContainer, "app")
	if got := steps(syncer.ActionStartContainer, metrics.StepFailure, syncer.ReasonRunContainerError); got != 1 {
		t.Errorf("StartContainer failure RunContainerError = %g, want 1", got)
	}
	if n, _ := passes(metrics.PassStepFailed); n != 1 {
		t.Errorf("step_failed passes: %d, want 1", n)
	}
	if n, _ := observations(t, reg, metrics.MetricCRIRequestDuration, "method", "StartContainer", "code", "Unavailable"); n != 1 {
		t.Errorf("failed StartContainer calls recorded: %d, want 1", n)
	}

	// An unreadable runtime fails the pass.
	h.RT.InjectError("ListPodSandbox", status.Error(codes.Unavailable, "runtime is restarting"))
	if _, err := h.TrySync(pod); err == nil {
		t.Fatal("pass on an unreadable runtime succeeded")
	}
	if n, _ := passes(metrics.PassError); n != 1 {
		t.Errorf("error passes: %d, want 1", n)
	}

	// A cancelled pass.
	other := enginetest.Pod()
	other.Name, other.UID = "other", "uid-2"
	ctx, cancel := context.WithCancel(h.Ctx)
	defer cancel()
	if _, err := h.S.SyncPod(ctx, other, h.In, func(s syncer.StepResult) {
		if s.Action == syncer.ActionCreatePodSandbox {
			cancel()
		}
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("SyncPod: %v, want context.Canceled", err)
	}
	if n, _ := passes(metrics.PassCanceled); n != 1 {
		t.Errorf("canceled passes: %d, want 1", n)
	}
	// A conflict is no pass.
	if total := countPasses(t, reg); total != 6 {
		t.Errorf("%d passes recorded, want 6", total)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

func countPasses(t *testing.T, reg prometheus.Gatherer) uint64 {
	t.Helper()
	var total uint64
	for _, o := range []string{metrics.PassSuccess, metrics.PassStepFailed, metrics.PassError, metrics.PassCanceled} {
		n, _ := observations(t, reg, metrics.MetricSyncPassDuration, "outcome", o)
		total += n
	}
	return total
}

func TestMetricsCRICalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	calls := func(reg prometheus.Gatherer, method, code string) uint64 {
		t.Helper()
		n, _ := observations(t, reg, metrics.MetricCRIRequestDuration, "method", method, "code", code)
		return n
	}

	reg, m := newMetrics(t, metrics.Options{ErrorCode: grpcCode})
	fake := enginetest.NewRuntime(enginetest.WithImages(enginetest.Image))
	rt, images := m.InstrumentRuntime(fake), m.InstrumentImages(fake)
	if _, err := rt.ListContainers(ctx, nil); err != nil {
		t.Fatal(err)
	}
	fake.InjectError("StopContainer", status.Error(codes.DeadlineExceeded, "timed out"))
	if err := rt.StopContainer(ctx, "c1", 10); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("StopContainer: %v; the decorator must return the runtime's error", err)
	}
	fake.InjectError("PullImage", status.Error(codes.NotFound, "no such image"))
	if _, err := images.PullImage(ctx, &runtimeapi.ImageSpec{Image: "registry.local/missing:1"}, nil, nil); err == nil {
		t.Fatal("PullImage of a missing enginetest.Image succeeded")
	}
	if _, err := images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: enginetest.Image}, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, code string
		want         uint64
	}{
		{"ListContainers", metrics.CodeOK, 1},
		{"StopContainer", "DeadlineExceeded", 1},
		{"StopContainer", metrics.CodeOK, 0},
		{"PullImage", "NotFound", 1},
		{"ImageStatus", metrics.CodeOK, 1},
	} {
		if got := calls(reg, c.method, c.code); got != c.want {
			t.Errorf("%s %s: %d calls recorded, want %d", c.method, c.code, got, c.want)
		}
	}

	// GetContainerEvents: the setup is timed, the stream's life is not.
	established := make(chan struct{})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- rt.GetContainerEvents(sctx, make(chan *runtimeapi.ContainerEventResponse, 1),
			func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
	}()
	select {
	case <-established:
	case <-ctx.Done():
		t.Fatal("event stream not established")
	}
	if got := calls(reg, "GetContainerEvents", metrics.CodeOK); got != 1 {
		t.Errorf("established streams recorded: %d, want 1", got)
	}
	stop()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("GetContainerEvents ended with %v, want Canceled", err)
	}
	if got := calls(reg, "GetContainerEvents", metrics.CodeOK) + calls(reg, "GetContainerEvents", "Canceled"); got != 1 {
		t.Errorf("the stream's end was recorded: %d observations, want 1", got)
	}
	fake.InjectError("GetContainerEvents", status.Error(codes.Unimplemented, "no events on containerd 1.6"))
	if err := rt.GetContainerEvents(ctx, nil, nil); status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetContainerEvents: %v", err)
	}
	if got := calls(reg, "GetContainerEvents", "Unimplemented"); got != 1 {
		t.Errorf("failed setups recorded: %d, want 1", got)
	}

	// Without ErrorCode, the codes the engine can tell apart without gRPC.
	reg, m = newMetrics(t, metrics.Options{})
	rt = m.InstrumentRuntime(fake)
	fake.InjectError("ContainerStatus", status.Error(codes.NotFound, "gone"))
	_, _ = rt.ContainerStatus(ctx, "c1", false)
	fake.InjectError("ContainerStatus", status.Error(codes.Unavailable, "down"))
	_, _ = rt.ContainerStatus(ctx, "c1", false)
	if got := calls(reg, "ContainerStatus", "NotFound"); got != 1 {
		t.Errorf("default code of NotFound: %d calls recorded, want 1", got)
	}
	if got := calls(reg, "ContainerStatus", "Unknown"); got != 1 {
		t.Errorf("default code of Unavailable: %d calls recorded as Unknown, want 1", got)
	}
}

func TestMetricsPodsAndBackoffs(t *testing.T) {
	t.Parallel()
	reg, m := newMetrics(t, metrics.Options{ErrorCode: grpcCode})
	h := newNodeHarness(t, func(o *engine.NodeOptions) {
		o.Backoff = plan.BackoffPolicy{Base: 10 * time.Second}
		o.Runtime, o.Images, o.Metrics = m.InstrumentRuntime(o.Runtime), m.InstrumentImages(o.Images), m
	})
	pods := func(phase corev1.PodPhase) float64 {
		t.Helper()
		return value(t, reg, metrics.MetricPods, "phase", string(phase))
	}
	backoffs := func() float64 {
		t.Helper()
		return value(t, reg, metrics.MetricBackoffsActive)
	}

	pod := enginetest.Pod()
	h.apply(pod) // once the node runs
	for _, p := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown} {
		if sample(t, reg, metrics.MetricPods, "phase", string(p)) == nil {
			t.Errorf("podsync_pods{phase=%q} not exported by a running node", p)
		}
	}
	if got := pods(corev1.PodRunning); got != 1 {
		t.Errorf("running pods = %g, want 1", got)
	}
	done := enginetest.Pod()
	done.Name, done.UID = "job", "uid-job"
	done.Spec.RestartPolicy = corev1.RestartPolicyNever
	done.Spec.Containers = []corev1.Container{enginetest.Container("work", "true")}
	h.apply(done)
	h.eventually("the job succeeds", func() bool { return pods(corev1.PodSucceeded) == 1 })
	if got := pods(corev1.PodRunning); got != 1 {
		t.Errorf("running pods = %g, want 1", got)
	}
	if got := backoffs(); got != 0 {
		t.Errorf("back-offs = %g before any crash", got)
	}
	passesBefore := countPasses(t, reg)

	// The worker restarts the first crash at once and backs off the
	// second: the gauge counts the container while it waits.
	if err := h.rt.ExitContainer(h.view(pod).FindContainer("app").ID, 1); err != nil {
		t.Fatal(err)
	}
	h.eventually("first restart", func() bool {
		inst := h.view(pod).FindContainer("app")
		return inst != nil && inst.State == model.ContainerRunning && inst.RestartCount == 1
	})
	h.clock.Step(time.Second)
	if err := h.rt.ExitContainer(h.view(pod).FindContainer("app").ID, 1); err != nil {
		t.Fatal(err)
	}
	h.eventually("one container in back-off", func() bool { return backoffs() == 1 })
	if got := value(t, reg, metrics.MetricSyncSteps, "action", string(syncer.ActionStartContainer),
		"result", metrics.StepBackoff, "reason", plan.ReasonCrashLoopBackOff); got < 1 {
		t.Errorf("back-off steps of the worker's passes = %g, want at least 1", got)
	}
	if after := countPasses(t, reg); after <= passesBefore {
		t.Errorf("the worker's passes were not recorded: %d before, %d after", passesBefore, after)
	}
	// The status can show the back-off before the pass that meets it has
	// armed the worker's timer: if that happens after this step, the
	// clock must move on for the timer to fire.
	h.clock.Step(11 * time.Second)
	h.eventually("restart after the back-off", func() bool {
		if inst := h.view(pod).FindContainer("app"); inst != nil && inst.State == model.ContainerRunning && inst.RestartCount == 2 {
			return true
		}
		h.clock.Step(time.Second)
		return false
	})
	h.eventually("no container in back-off", func() bool { return backoffs() == 0 })

	// A deleted pod is no longer counted.
	if _, err := h.node.Delete(h.ctx, pod.Namespace, pod.Name, "", nil); err != nil {
		t.Fatal(err)
	}
	if got, gotDone := pods(corev1.PodRunning), pods(corev1.PodSucceeded); got != 0 || gotDone != 1 {
		t.Errorf("after Delete: running %g, succeeded %g; want 0 and 1", got, gotDone)
	}
	if n, _ := observations(t, reg, metrics.MetricCRIRequestDuration, "method", "StopContainer", "code", metrics.CodeOK); n == 0 {
		t.Error("the deletion's StopContainer calls were not recorded")
	}

	// A stopped node describes nothing.
	h.stop()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == metrics.MetricPods || mf.GetName() == metrics.MetricBackoffsActive {
			t.Errorf("after Run: %s has %d samples, want none", mf.GetName(), len(mf.GetMetric()))
		}
	}
}
