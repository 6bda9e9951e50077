package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestScaleFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-scale", "-scale-nodes", "50, 5,5", "-scale-pods", "10", "-scale-vks", "2"}, "/repo")
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.scale
	if !sc.enabled || strings.Join(strings.Fields(joinInts(sc.nodes)), "") != "5,50" || sc.pods != 10 || sc.vks != 2 || sc.spread ||
		sc.runs != 1 || sc.kwokVersion != scaleDefaultKwok || sc.idle != 15*time.Second || sc.nodeState != defaultNodeState {
		t.Errorf("scale config %+v", sc)
	}
	if cfg.out != "/repo/"+scaleReportFile {
		t.Errorf("-out %q, want the scale report", cfg.out)
	}
	if cfg, err := parseFlags([]string{"-scale", "-out", "/tmp/x.md"}, "/repo"); err != nil || cfg.out != "/tmp/x.md" {
		t.Errorf("-out given: %q, %v", cfg.out, err)
	}
	if cfg, err := parseFlags(nil, "/repo"); err != nil || cfg.scale.enabled || cfg.out != "/repo/BENCHMARKS.md" {
		t.Errorf("without -scale: %+v, %q, %v", cfg.scale, cfg.out, err)
	}
	if cfg, err := parseFlags([]string{"-scale", "-scale-node-state", "disk"}, "/repo"); err != nil || cfg.scale.nodeState != "" {
		t.Errorf("-scale-node-state disk: %q, %v; want the state on the disk", cfg.scale.nodeState, err)
	}
	dir := t.TempDir()
	if cfg, err := parseFlags([]string{"-scale", "-scale-node-state", dir}, "/repo"); err != nil || cfg.scale.nodeState != dir {
		t.Errorf("-scale-node-state %s: %q, %v", dir, cfg.scale.nodeState, err)
	}
	for _, bad := range [][]string{
		{"-scale-nodes", "0"}, {"-scale-nodes", "x"}, {"-scale-pods", "200"}, {"-scale-nodes", "4", "-scale-vks", "5"},
		{"-scale-placement", "random"}, {"-scale-runs", "0"}, {"-kwok-version", "latest"},
		{"-scale-idle", "-1s"}, {"-scale-node-state", "/no/such/dir"},
	} {
		if _, err := parseFlags(append([]string{"-scale"}, bad...), "/repo"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestDeployment(t *testing.T) {
	d := deployment(7, "hollow-008", 30, false)
	if d.Name != "scale-007" || *d.Spec.Replicas != 30 || d.Spec.Template.Spec.NodeSelector[corev1.LabelHostname] != "hollow-008" ||
		d.Spec.Selector.MatchLabels["app"] != d.Spec.Template.Labels["app"] {
		t.Errorf("pinned deployment %+v", d)
	}
	if d := deployment(7, "hollow-008", 30, true); d.Spec.Template.Spec.NodeSelector != nil {
		t.Errorf("spread deployment has a node selector %v", d.Spec.Template.Spec.NodeSelector)
	}
}

func TestScrapeAPICounts(t *testing.T) {
	text := `# HELP apiserver_request_total x
apiserver_request_total{code="200",verb="GET"} 10
apiserver_request_total{code="201",verb="POST"} 5
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 100
apiserver_flowcontrol_dispatched_requests_total{flow_schema="podsync-bench-agent",priority_level="exempt"} 7
apiserver_longrunning_requests{component="apiserver",resource="pods",verb="WATCH"} 3
apiserver_longrunning_requests{component="apiserver",resource="pods",verb="CONNECT"} 9
apiserver_longrunning_requests{component="apiserver",resource="nodes",verb="WATCH"} 2
apiserver_flowcontrol_dispatched_requests_total{flow_schema="podsync-bench-agent-events",priority_level="exempt"} 3
apiserver_flowcontrol_dispatched_requests_total{flow_schema="podsync-bench-agent-pod-status",priority_level="exempt"} 2
apiserver_flowcontrol_dispatched_requests_total{flow_schema="podsync-bench-agent-pod-status",priority_level="workload-low"} 1
apiserver_flowcontrol_dispatched_requests_total{flow_schema="podsync-bench-agent-else",priority_level="exempt"} 50
`
	c, err := parseAPICounts(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var agent requestCounts
	agent[reqOther], agent[reqEvents], agent[reqPodStatus] = 7, 3, 3
	if c != (apiCounts{requests: 15, agent: agent, watches: 5}) || c.agent.total() != 13 {
		t.Errorf("counts %+v", c)
	}
}

// TestAgentFlowSchemas checks that every kind has a flow schema of its
// own, named as parseAPICounts reads them, and that the catch-all comes
// after the others.
func TestAgentFlowSchemas(t *testing.T) {
	fss := agentFlowSchemas()
	if len(fss) != int(numRequestKinds) {
		t.Fatalf("%d flow schemas for %d kinds", len(fss), numRequestKinds)
	}
	seen := map[string]bool{}
	for _, fs := range fss {
		k, ok := requestKindOf(fs.Name)
		if !ok || seen[fs.Name] {
			t.Errorf("flow schema %q: kind %v, %v, seen %v", fs.Name, k, ok, seen[fs.Name])
		}
		seen[fs.Name] = true
		wantPrec := int32(2)
		if k == reqOther {
			wantPrec = 3
		}
		if fs.Spec.MatchingPrecedence != wantPrec || fs.Spec.PriorityLevelConfiguration.Name != "exempt" {
			t.Errorf("flow schema %q: precedence %d, level %q", fs.Name, fs.Spec.MatchingPrecedence, fs.Spec.PriorityLevelConfiguration.Name)
		}
		for _, r := range fs.Spec.Rules {
			if len(r.Subjects) != 1 || r.Subjects[0].User == nil || r.Subjects[0].User.Name != agentUser {
				t.Errorf("flow schema %q: subjects %+v", fs.Name, r.Subjects)
			}
			for _, rr := range r.ResourceRules {
				if len(rr.Verbs) == 0 || (!rr.ClusterScope && len(rr.Namespaces) == 0) {
					t.Errorf("flow schema %q: rule %+v matches nothing", fs.Name, rr)
				}
			}
		}
	}
}

func TestPodWatchLatencies(t *testing.T) {
	w := newPodWatch()
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	pod := func(uid string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Status: corev1.PodStatus{Phase: phase}}
	}
	w.see(pod("a", corev1.PodPending), t0)
	w.see(pod("b", corev1.PodPending), t0.Add(100*time.Millisecond))
	w.see(pod("a", corev1.PodRunning), t0.Add(time.Second))
	w.see(pod("a", corev1.PodRunning), t0.Add(3*time.Second)) // later updates change nothing
	n, last, err := w.state()
	if n != 1 || !last.Equal(t0.Add(time.Second)) || err != nil {
		t.Errorf("state %d, %s, %v; want one Running at 1 s", n, last, err)
	}
	w.see(pod("b", corev1.PodRunning), t0.Add(2100*time.Millisecond))
	lat := w.latencies()
	if len(lat) != 2 || quantile(lat, 0) != 1000 || quantile(lat, 1) != 2000 {
		t.Errorf("latencies %v, want 1000 and 2000 ms", lat)
	}
}

// TestPodWatchSplit: a pod's startup splits at its binding, and the
// timeline ranks the pods on each node in the order they were bound.
func TestPodWatchSplit(t *testing.T) {
	w := newPodWatch()
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	pod := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(name), Name: name}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: phase}}
	}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w.see(pod("a", "", corev1.PodPending), at(0))
	w.see(pod("b", "", corev1.PodPending), at(10))
	w.see(pod("b", "n1", corev1.PodPending), at(20)) // b is bound first
	w.see(pod("a", "n1", corev1.PodPending), at(30))
	w.see(pod("c", "n2", corev1.PodRunning), at(40)) // seen bound and Running at once
	w.see(pod("a", "n1", corev1.PodRunning), at(530))
	w.see(pod("b", "n1", corev1.PodRunning), at(70))
	sched, started := w.split()
	slices.Sort(sched)
	slices.Sort(started)
	if want := []float64{0, 10, 30}; !slices.Equal(sched, want) {
		t.Errorf("creation → bound %v, want %v", sched, want)
	}
	if want := []float64{0, 50, 500}; !slices.Equal(started, want) {
		t.Errorf("bound → Running %v, want %v", started, want)
	}
	path := filepath.Join(t.TempDir(), "pods.tsv")
	if err := w.writeTimeline(path, t0); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "pod\tnode\trank\tcreated_ms\tbound_ms\trunning_ms\n" +
		"a\tn1\t2\t0.0\t30.0\t530.0\n" +
		"b\tn1\t1\t10.0\t20.0\t70.0\n" +
		"c\tn2\t1\t40.0\t40.0\t40.0\n"
	if string(got) != want {
		t.Errorf("timeline:\n%s\nwant:\n%s", got, want)
	}
}

// scaleRunOf is a run whose pods started in ms each.
// Its agent made 10 requests a pod: 3 of events, 2 of pod status, 1 of
// tokens and 4 others.
func scaleRunOf(sys scaleSystem, nodes int, cpu float64, rssB, rssA int64, ms ...float64) *scaleRun {
	r := &scaleRun{sys: sys, nodes: nodes, pods: len(ms), latencies: ms, allRunning: ms[len(ms)-1], agentCPU: cpu,
		agentRSSBefore: rssB, agentRSSAfter: rssA, allRequests: float64(30 * len(ms)), watches: 4}
	for _, v := range ms { // a quarter of each pod's startup is the scheduler's
		r.scheduled, r.started = append(r.scheduled, v/4), append(r.started, v*3/4)
	}
	pods := float64(len(ms))
	r.agentByKind[reqEvents], r.agentByKind[reqPodStatus], r.agentByKind[reqTokens], r.agentByKind[reqOther] = 3*pods, 2*pods, pods, 4*pods
	return r
}

// smallScaleResults is the config of a small run (2 and 4 nodes × 2
// pods) and its results made of runs.
func smallScaleResults(t *testing.T, runs ...*scaleRun) (config, *scaleResults) {
	t.Helper()
	cfg, err := parseFlags([]string{"-scale", "-scale-nodes", "2,4", "-scale-pods", "2"}, "/repo")
	if err != nil {
		t.Fatal(err)
	}
	return cfg, &scaleResults{started: time.Now(), finished: time.Now(), kubeVersion: "v1.37.2", kwokVersion: scaleDefaultKwok, runs: runs}
}

// TestScaleReport: the report's verdicts follow the figures — p99, the
// ratio to kwok paired round by round, podsync-vk's per-pod costs and
// their growth with the node count — and a kwok that failed fails its
// columns and says why, never drops them.
func TestScaleReport(t *testing.T) {
	cfg, res := smallScaleResults(t,
		scaleRunOf(sysKwok, 2, 1, 10<<20, 10<<20, 100, 200, 300, 400),
		scaleRunOf(sysPodsync, 2, 2, 20<<20, 21<<20, 100, 200, 300, 440), // p99 ≈ 436 ms: 1.1× kwok
		scaleRunOf(sysKwok, 4, 1, 10<<20, 10<<20, 100, 100, 100, 100, 100, 100, 100, 1000),
		scaleRunOf(sysPodsync, 4, 8, 20<<20, 30<<20, 100, 100, 100, 100, 100, 100, 100, 6000))
	// Idle CPU per node served, measured in the 4-node runs only.
	res.runs[2].idle = idleCPU{empty: 0.1, loaded: 0.25, ok: true}
	res.runs[3].idle = idleCPU{empty: 0.5, loaded: 1.25, ok: true}
	res.runs[3].nodeIdle = idleCPU{empty: 2, loaded: 3, ok: true}
	out := renderScaleReport(res, cfg)
	for _, want := range []string{
		"> **Small run** (2, 4 nodes × 2 pods)",
		"**Idle** (CPU with nothing asked of it, over 15s,",
		"| 2 | podsync | — | — | — | — |",
		"| 4 | kwok | 0.10 (0.10–0.10) | 0.25 (0.25–0.25) | — | — |",
		"| 4 | podsync | 0.50 (0.50–0.50) | 1.25 (1.25–1.25) | 2.00 (2.00–2.00) | 3.00 (3.00–3.00) |",
		"| pod startup p99 ≤ 5 s, 2 nodes × 2 pods | 436 ms | ✅ within |",
		"| pod startup p99 ÷ kwok's ≤ 1.2, 2 nodes | 1.10 | ✅ within |",
		"| pod startup p99 ≤ 5 s, 4 nodes × 2 pods | 5587 ms | ❌ over |",
		"| pod startup p99 ÷ kwok's ≤ 1.2, 4 nodes | 5.96 | ❌ over |",
		// 8 ms over 8 pods; 10 MiB over 8 pods.
		"| podsync-vk RSS ≤ 2 MiB per pod (its growth over the workload), 4 nodes | 1280 KiB | ✅ within |",
		"| podsync-vk CPU ≤ 1 ms per pod, 4 nodes | 1.00 ms | ✅ within |",
		"| linear in nodes: podsync-vk CPU per pod at 4 nodes ÷ at 2 ≤ 1.25 | 2.00 | ❌ over |",
		"| 4 | podsync | 8 |",
		"| 4 | podsync | 25.0 ms (25.0 ms–25.0 ms) | 1397 ms (1397 ms–1397 ms) | 75.0 ms (75.0 ms–75.0 ms) | 1402 ms (1402 ms–1402 ms) | 4190 ms (4190 ms–4190 ms) |",
		"| nodes | system | pod status | events | tokens | leases | nodes | other |",
		"| 4 | kwok | 2.00 (2.00–2.00) | 3.00 (3.00–3.00) | 1.00 (1.00–1.00) | 0.00 (0.00–0.00) | 0.00 (0.00–0.00) | 4.00 (4.00–4.00) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}

	res.kwokErr = "go install sigs.k8s.io/kwok/cmd/kwok@v0.8.0: no network"
	for _, r := range res.runs {
		if r.sys == sysKwok {
			r.err = "kwok could not be built: " + res.kwokErr
		}
	}
	if !res.failed() {
		t.Error("a run without kwok does not fail")
	}
	out = renderScaleReport(res, cfg)
	for _, want := range []string{
		scaleNotAllSystemsBanner,
		"| pod startup p99 ÷ kwok's ≤ 1.2, 2 nodes | FAILED | — |",
		"| 2 | kwok | 4 | FAILED: kwok could not be built: go install",
		"- kwok v0.8.0 could not be built: go install sigs.k8s.io/kwok/cmd/kwok@v0.8.0: no network",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report without kwok lacks %q:\n%s", want, out)
		}
	}
}

func TestCountRefused(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	refused := `{"level":"warn","msg":"finished call","grpc_method":"SyncPod","grpc_code":"ResourceExhausted"}` + "\n"
	console := "2026-12-05T23:42:28.581Z\tWARN\tgrpc\tlogging/logging.go:220\tfinished call\t" +
		`{"rpc_method": "/podsync.v1.PodSyncService/SyncPod", "grpc_code": "ResourceExhausted", "error": "rate limit"}` + "\n"
	other := `{"level":"warn","msg":"finished call","grpc_method":"SyncPod","grpc_code":"Unavailable"}` + "\n"
	if err := os.WriteFile(a, []byte(refused+other+refused), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(console), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := countRefused([]string{a, b}); err != nil || n != 3 {
		t.Errorf("countRefused = %d, %v; want 3 (two JSON lines, one console line)", n, err)
	}
	if _, err := countRefused([]string{filepath.Join(dir, "gone.log")}); err == nil {
		t.Error("countRefused of a missing log: nil error")
	}
}

// TestScaleReportWorkPerPod: podsync-vk's CPU per pod less its idle rate
// (no pods) over the workload's window is shown beside the target's
// figure, with its growth in nodes, and only when idle was measured.
func TestScaleReportWorkPerPod(t *testing.T) {
	cfg, res := smallScaleResults(t,
		scaleRunOf(sysKwok, 2, 1, 10<<20, 10<<20, 100, 200, 300, 400),
		scaleRunOf(sysPodsync, 2, 20, 20<<20, 21<<20, 100, 200, 300, 400),
		scaleRunOf(sysKwok, 4, 1, 10<<20, 10<<20, 100, 100, 100, 100, 100, 100, 100, 1000),
		scaleRunOf(sysPodsync, 4, 80, 20<<20, 30<<20, 100, 100, 100, 100, 100, 100, 100, 1000))
	const row = "| podsync-vk CPU per pod less its idle rate over the workload, 4 nodes (shown, no target) |"
	if out := renderScaleReport(res, cfg); strings.Contains(out, row) {
		t.Errorf("without idle figures the report shows %q", row)
	}
	res.runs[1].idle = idleCPU{empty: 1, loaded: 1, ok: true}
	res.runs[3].idle = idleCPU{empty: 1, loaded: 1, ok: true}
	out := renderScaleReport(res, cfg)
	for _, want := range []string{
		// (80 ms − 1 ms/s × 4 nodes × 1 s) ÷ 8 pods; at 2 nodes (20 − 1 × 2 × 0.4) ÷ 4 = 4.80.
		row + " 9.50 ms | — |",
		"| linear in nodes: that figure at 4 nodes ÷ at 2 (shown, no target) | 1.98 | — |",
		"| podsync-vk CPU ≤ 1 ms per pod, 4 nodes | 10.00 ms | ❌ over |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
