package main

import (
	"strings"
	"testing"
)

// TestRenderTargetsRounds: ratio and CPU targets are judged on the median
// of at least minVerdictRounds rounds and shown with their spread; the raw
// floor at N = largeN is shown without a target (issue 40 replaced it by
// the kubelet's).
func TestRenderTargetsRounds(t *testing.T) {
	r10, r100 := newRunResult(10), newRunResult(largeN)
	for i := range minVerdictRounds {
		r10.podsyncRatio.add(1.0 + float64(i)/100)
	}
	for _, v := range []float64{1.01, 0.99, 1.02} {
		r100.podsyncRatio.add(v)
		r100.podsyncdCPU.add(v * 3)
	}
	r30 := newRunResult(30)
	r30.podsyncRatio.add(1.2)
	fr := &flavourResult{flavour: "2", full: true, runs: []*runResult{r10, r30, r100}}
	var w strings.Builder
	renderTargets(&w, &results{flavours: []*flavourResult{fr}})
	got := w.String()
	for _, want := range []string{
		"| RunPods ÷ raw floor, N = 10, containerd 2.x: ≤ 1.10 | 1.03 (1.00–1.06), 7 rounds | ✅ within |",
		"| RunPods ÷ raw floor, N = 30, containerd 2.x: ≤ 1.10 | 1.20 (1.20–1.20), 1 round | — (1 round; a verdict needs 7) |",
		"| RunPods ÷ raw floor, N = 100, containerd 2.x (shown, no target) | 1.01 | — |",
		"| podsyncd CPU per pod (N = 100): ≤ 3 ms | 3.03 ms (2.97 ms–3.06 ms), 3 rounds | — (3 rounds; a verdict needs 7) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "≤ 1.00") {
		t.Errorf("the raw floor's N = 100 target is back:\n%s", got)
	}
}

// TestRenderTargetsSkippedAPILoad: an API load section skipped at the
// deadline gets no verdict on podsyncd's RSS, which it never read.
func TestRenderTargetsSkippedAPILoad(t *testing.T) {
	fr := &flavourResult{flavour: "2", full: true,
		api: &apiResult{pods: 250, clients: 8, errs: []string{"skipped: the run passed its -deadline"}}}
	var w strings.Builder
	renderTargets(&w, &results{flavours: []*flavourResult{fr}})
	got := w.String()
	if want := "| podsyncd RSS with 250 pods: ≤ 80 MiB | — (peak —) | — |"; !strings.Contains(got, want) {
		t.Errorf("targets lack %q:\n%s", want, got)
	}
	if strings.Contains(got, "✅") {
		t.Errorf("a skipped section got a verdict:\n%s", got)
	}
}
