package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

func TestClusterFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-cluster", "-cluster-n", "100, 30,30", "-cluster-rounds", "7"}, "/repo")
	if err != nil {
		t.Fatal(err)
	}
	cc := cfg.cluster
	if !cc.enabled || joinInts(cc.ns) != "30, 100" || cc.rounds != 7 || cc.samples != 5 {
		t.Errorf("cluster config %+v", cc)
	}
	if cfg.out != "/repo/"+clusterReportFile {
		t.Errorf("-out %q, want the cluster report", cfg.out)
	}
	if cfg, err := parseFlags([]string{"-cluster"}, "/repo"); err != nil || joinInts(cfg.cluster.ns) != "30, 100" || cfg.cluster.rounds != 3 {
		t.Errorf("defaults: %+v, %v", cfg.cluster, err)
	}
	if cfg.cluster.rateLimit {
		t.Error("podsyncd's rate limit kept by default")
	}
	if cfg, err := parseFlags([]string{"-cluster", "-cluster-rate-limit"}, "/repo"); err != nil || !cfg.cluster.rateLimit {
		t.Errorf("-cluster-rate-limit: %+v, %v", cfg.cluster, err)
	}
	if cfg, err := parseFlags([]string{"-cluster", "-out", "/tmp/c.md"}, "/repo"); err != nil || cfg.out != "/tmp/c.md" {
		t.Errorf("-out given: %q, %v", cfg.out, err)
	}
	for _, bad := range [][]string{
		{"-cluster-n", "0"}, {"-cluster-n", "200"}, {"-cluster-n", "x"}, {"-cluster-rounds", "0"}, {"-cluster-samples", "0"}, {"-scale"},
	} {
		if _, err := parseFlags(append([]string{"-cluster"}, bad...), "/repo"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestRoundOrder(t *testing.T) {
	if got := roundOrder(1); !cmp.Equal(got, []clusterNode{nodePodsync, nodeKubelet}) {
		t.Errorf("round 1: %v", got)
	}
	if got := roundOrder(2); !cmp.Equal(got, []clusterNode{nodeKubelet, nodePodsync}) {
		t.Errorf("round 2: %v", got)
	}
}

// TestRegisteredKubeletConfig: a kubelet registered with the API server
// serves on its node IP and takes the API server's client certificate,
// authorized by the API server, and no anonymous request.
func TestRegisteredKubeletConfig(t *testing.T) {
	s := kubeletSettings{dir: "/b/kubelet", cgroupRoot: "/localcri-1", endpoint: "unix:///run/c.sock", port: 4001, healthzPort: 4002,
		node: "kubelet-a", kubeconfig: "/k/node.kubeconfig", clientCA: "/k/ca.crt", nodeIP: "192.0.2.2"}
	data, err := kubeletConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	var got kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(data, &got); err != nil {
		t.Fatalf("the kubelet would not read its config: %v\n%s", err, data)
	}
	if got.Address != "192.0.2.2" || got.Authentication.X509.ClientCAFile != "/k/ca.crt" || *got.Authentication.Anonymous.Enabled ||
		!*got.Authentication.Webhook.Enabled || got.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeWebhook ||
		got.CgroupRoot != "/localcri-1" || got.CgroupsPerQOS != nil {
		t.Errorf("registered kubelet config:\n%s", data)
	}
	if s.nodeName() != "kubelet-a" || (kubeletSettings{}).nodeName() != kubeletNode {
		t.Errorf("node names %q, %q", s.nodeName(), kubeletSettings{}.nodeName())
	}
}

func TestClusterDeployment(t *testing.T) {
	d := clusterDeployment(nodeKubelet)
	spec := d.Spec.Template.Spec
	if d.Name != "bench-kubelet" || *d.Spec.Replicas != 0 || spec.NodeSelector[corev1.LabelHostname] != kubeletNodeName ||
		d.Spec.Selector.MatchLabels["app"] != d.Spec.Template.Labels["app"] ||
		spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent || spec.TerminationGracePeriodSeconds != nil {
		t.Errorf("deployment %+v", d)
	}
	if d := clusterDeployment(nodePodsync); d.Spec.Template.Spec.NodeSelector[corev1.LabelHostname] != podsyncNodeName {
		t.Errorf("podsync deployment's selector %v", d.Spec.Template.Spec.NodeSelector)
	}
}

// TestPodWatchClusterViews: Ready pods are counted from a start, a pod
// deleted is gone, and the pods left are those not gone.
func TestPodWatchClusterViews(t *testing.T) {
	w := newPodWatch()
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	pod := func(uid string, ready bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: "p-" + uid},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	w.see(pod("old", true), t0.Add(-time.Second))
	w.see(pod("a", false), t0.Add(100*time.Millisecond))
	w.see(pod("b", false), t0.Add(200*time.Millisecond))
	w.see(pod("a", true), t0.Add(time.Second))
	if n, last, err := w.readySince(t0); n != 1 || !last.Equal(t0.Add(time.Second)) || err != nil {
		t.Errorf("readySince: %d, %s, %v; want a alone", n, last, err)
	}
	w.see(pod("b", true), t0.Add(2*time.Second))
	if n, last, _ := w.readySince(t0); n != 2 || !last.Equal(t0.Add(2*time.Second)) {
		t.Errorf("readySince: %d, %s; want a and b", n, last)
	}
	w.deleted(pod("old", true), t0.Add(3*time.Second))
	w.deleted(pod("a", true), t0.Add(4*time.Second))
	if left, last, _ := w.present(); left != 1 || !last.Equal(t0.Add(4*time.Second)) {
		t.Errorf("present: %d, %s; want b left, a gone at 4 s", left, last)
	}
	if uid, name, err := w.aReadyPodUID(); uid != "b" || name != "p-b" || err != nil {
		t.Errorf("a Ready pod: %q %q %v; want b, the only one not gone", uid, name, err)
	}
	w.deleted(pod("b", true), t0.Add(5*time.Second))
	if _, _, err := w.aReadyPodUID(); err == nil {
		t.Error("a Ready pod found when every pod is gone")
	}
}

// clusterRunOf is a run whose figures are all ms, but for the pods'
// latencies.
func clusterRunOf(node clusterNode, round, pods int, ms float64) *clusterRun {
	return &clusterRun{node: node, round: round, pods: pods, allReady: ms, latencies: []float64{ms / 2, ms},
		replacement: ms, deletedGone: ms, scaleDownGone: ms, logs: []float64{ms}, exec: []float64{ms}}
}

// TestClusterReport: the verdicts follow the ratios, paired round by
// round whichever node ran first, with their median and range; a kubelet
// that could not run fails its column and the run, and says why, never
// drops the column.
func TestClusterReport(t *testing.T) {
	cfg, err := parseFlags([]string{"-cluster"}, "/repo")
	if err != nil {
		t.Fatal(err)
	}
	res := &clusterResults{started: time.Now(), finished: time.Now(), kubeVersion: "v1.37.2", kubeletVersion: "Kubernetes v1.37.2",
		machine: machine{cpus: 2}, loadBefore: "1.00 1.00 1.00", loadAfter: "3.90 2.00 1.00"}
	// N = 30: podsync 0.80, 0.70 and 0.90 of the kubelet's; N = 100:
	// 0.80, 1.00, 0.95 — median 0.95, over.
	for round, pk := range map[int][2]float64{1: {800, 1000}, 2: {1400, 2000}, 3: {900, 1000}} {
		res.runs = append(res.runs, clusterRunOf(nodeKubelet, round, 30, pk[1]), clusterRunOf(nodePodsync, round, 30, pk[0]))
	}
	for round, pk := range map[int][2]float64{1: {4000, 5000}, 2: {5000, 5000}, 3: {1900, 2000}} {
		res.runs = append(res.runs, clusterRunOf(nodePodsync, round, 100, pk[0]), clusterRunOf(nodeKubelet, round, 100, pk[1]))
	}
	if res.failed() {
		t.Error("a run without failures failed")
	}
	out := renderClusterReport(res, cfg)
	for _, want := range []string{
		"| 0 → N, all Ready, N = 30: ≤ 0.85 | 0.80 (0.70–0.90) | ✅ within |",
		"| 0 → N, all Ready, N = 100: ≤ 0.85 | 0.95 (0.80–1.00) | ❌ over |",
		"| one pod deleted → its object gone, N = 30: ≤ 1.00 | 0.80 (0.70–0.90) | ✅ within |",
		"| N → 0, every pod object gone, N = 100: ≤ 1.00 | 0.95 (0.80–1.00) | ✅ within |",
		"rate limit of calls per identity off for podsync-vk",
		"### N = 100",
		"| 0 → N, all Ready | 4000 ms (1900 ms–5000 ms) | 5000 ms (2000 ms–5000 ms) | 0.95 (0.80–1.00) |",
		"| kubectl exec | 900 ms (800 ms–1400 ms) | 1000 ms (1000 ms–2000 ms) | 0.80 (0.70–0.90) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Small run") || strings.Contains(out, "## Failures") || strings.Contains(out, "Loaded machine") {
		t.Errorf("a full run on a quiet machine reads as small, failed or loaded:\n%s", out)
	}
	// The run's own pods load the machine by its end: not other work.
	res.loadAfter = "30.5 20.1 10.0"
	if out := renderClusterReport(res, cfg); strings.Contains(out, "Loaded machine") {
		t.Errorf("a run that loaded the machine itself reads as loaded by other work:\n%s", out)
	}
	res.loadBefore = "5.20 3.00 1.00"
	if out := renderClusterReport(res, cfg); !strings.Contains(out, "> **Loaded machine**: load average 5.20 3.00 1.00 at the start on 2 cores") {
		t.Errorf("a run started on a loaded machine does not say so:\n%s", out)
	}
	res.loadBefore, res.loadAfter = "1.00 1.00 1.00", "3.90 2.00 1.00"

	res.kubeletErr = "build the kubelet with hack/kube/build.sh kubelet: exit status 1: no space left on device"
	for _, r := range res.runs {
		if r.node == nodeKubelet {
			r.err = "no kubelet node: " + res.kubeletErr
		}
	}
	if !res.failed() {
		t.Error("a run without the kubelet does not fail")
	}
	out = renderClusterReport(res, cfg)
	for _, want := range []string{
		clusterNoKubeletBanner,
		"| 0 → N, all Ready, N = 30: ≤ 0.85 | FAILED | — |",
		"| 0 → N, all Ready | 4000 ms (1900 ms–5000 ms) | FAILED | FAILED |",
		"- the kubelet v1.37.2 could not be built or started: build the kubelet with hack/kube/build.sh kubelet: exit status 1: no space left on device",
		"- round 1, kubelet node, N = 30: no kubelet node: build the kubelet",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report without the kubelet lacks %q:\n%s", want, out)
		}
	}
}

func TestClusterReportSmallRun(t *testing.T) {
	cfg, err := parseFlags([]string{"-cluster", "-cluster-n", "5", "-cluster-rounds", "1"}, "/repo")
	if err != nil {
		t.Fatal(err)
	}
	res := &clusterResults{started: time.Now(), finished: time.Now(),
		runs: []*clusterRun{clusterRunOf(nodePodsync, 1, 5, 100), clusterRunOf(nodeKubelet, 1, 5, 200)}}
	out := renderClusterReport(res, cfg)
	for _, want := range []string{
		"> **Small run** (N = 5, 1 round(s))",
		"| 0 → N, all Ready, N = 30 and 100: ≤ 0.85 | — (neither N ran) | — |",
		"| one pod deleted → its object gone, N = 5: ≤ 1.00 | 0.50 (0.50–0.50) | ✅ within |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("small report lacks %q:\n%s", want, out)
		}
	}
}
