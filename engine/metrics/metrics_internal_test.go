package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
