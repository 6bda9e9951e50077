package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/syncer"
)

// TestMetricsStepReasonsAreBounded: a reason that is not the engine's is
// counted as Other, never as itself.
func TestMetricsStepReasonsAreBounded(t *testing.T) {
	m, err := New(prometheus.NewRegistry(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveStep(syncer.StepResult{Action: syncer.ActionStartContainer, Err: errors.New("boom"), Reason: "exec: \"foo\": not found"})
	m.ObserveStep(syncer.StepResult{Action: syncer.ActionPullImage, Err: errors.New("denied"), Reason: podstatus.ReasonErrImagePull})
	for _, c := range []struct {
		labels []string
		want   int
	}{
		{[]string{"StartContainer", StepFailure, ReasonOther}, 1},
		{[]string{"StartContainer", StepFailure, "exec: \"foo\": not found"}, 0},
		{[]string{"PullImage", StepFailure, podstatus.ReasonErrImagePull}, 1},
	} {
		if got := counterValue(t, m.steps.WithLabelValues(c.labels...)); got != float64(c.want) {
			t.Errorf("steps%v = %g, want %d", c.labels, got, c.want)
		}
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	pb := &dto.Metric{}
	if err := (<-ch).Write(pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetCounter().GetValue()
}

// TestNilMetrics: nil Metrics record nothing and wrap nothing.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.ObserveStep(syncer.StepResult{Action: syncer.ActionStartContainer})
	m.ObservePass(syncer.SyncResult{}, nil, false, time.Second)
	m.Attach(nil)
	m.Detach(nil)
	var rt syncer.Runtime = &timedRuntime{}
	if got := m.InstrumentRuntime(rt); got != rt {
		t.Errorf("nil Metrics wrapped the runtime: %T", got)
	}
	var is syncer.ImageService = &timedImages{}
	if got := m.InstrumentImages(is); got != is {
		t.Errorf("nil Metrics wrapped the image service: %T", got)
	}
}

// versionedRuntime is a runtime that says its version.
type versionedRuntime struct{ syncer.Runtime }

func (versionedRuntime) Version(context.Context, string) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "v2.4.2"}, nil
}

// TestInstrumentedRuntimeSaysItsVersion: the instrumented runtime passes
// CRI Version through (image volumes depend on it), and says when the
// runtime it wraps has none.
func TestInstrumentedRuntimeSaysItsVersion(t *testing.T) {
	m, err := New(prometheus.NewRegistry(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m.InstrumentRuntime(versionedRuntime{}).(syncer.Versioner)
	if !ok {
		t.Fatal("the instrumented runtime hides CRI Version")
	}
	resp, err := v.Version(context.Background(), "v1")
	if err != nil || resp.GetRuntimeVersion() != "v2.4.2" {
		t.Errorf("Version = %v, %v", resp, err)
	}
	type bare struct{ syncer.Runtime }
	if _, err := m.InstrumentRuntime(bare{}).(syncer.Versioner).Version(context.Background(), "v1"); !errors.Is(err, syncer.ErrNoVersion) {
		t.Errorf("Version of a runtime without one: %v, want ErrNoVersion", err)
	}
}
