package main

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/podsync/podsync/internal/testing/localcri"
)

func TestKubeletConfig(t *testing.T) {
	s := kubeletSettings{dir: "/b/kubelet-1", cgroupRoot: "/podsync-bench-1", endpoint: "unix:///run/c.sock", port: 4001, healthzPort: 4002}
	data, err := kubeletConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	var got kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(data, &got); err != nil {
		t.Fatalf("the kubelet would not read its config: %v\n%s", err, data)
	}
	if got.Kind != "KubeletConfiguration" || got.APIVersion != "kubelet.config.k8s.io/v1beta1" {
		t.Errorf("kind %q apiVersion %q", got.Kind, got.APIVersion)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"staticPodPath", got.StaticPodPath, "/b/kubelet-1/manifests"},
		{"containerRuntimeEndpoint", got.ContainerRuntimeEndpoint, "unix:///run/c.sock"},
		{"cgroupDriver", got.CgroupDriver, "cgroupfs"},
		{"cgroupRoot", got.CgroupRoot, "/podsync-bench-1"},
		// The default, the configuration compared.
		{"cgroupsPerQOS unset", got.CgroupsPerQOS == nil, true},
		{"failCgroupV1", *got.FailCgroupV1, false},
		{"failSwapOn", *got.FailSwapOn, false},
		{"podLogsDir", got.PodLogsDir, "/b/kubelet-1/pod-logs"},
		{"volumePluginDir", got.VolumePluginDir, "/b/kubelet-1/volume-plugins"},
		{"port", got.Port, int32(4001)},
		{"healthzPort", *got.HealthzPort, int32(4002)},
		{"readOnlyPort", got.ReadOnlyPort, int32(0)},
		{"makeIPTablesUtilChains", *got.MakeIPTablesUtilChains, false},
		{"anonymous", *got.Authentication.Anonymous.Enabled, true},
		{"webhook", *got.Authentication.Webhook.Enabled, false},
		{"authorization", got.Authorization.Mode, kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		{"seccompDefault", *got.SeccompDefault, true},
		{"resolvConf", *got.ResolverConfig, ""},
		{"imagefs eviction", got.EvictionHard["imagefs.available"], "1%"},
		{"image GC", *got.ImageGCHighThresholdPercent, int32(100)},
	}
	for _, c := range checks {
		if !cmp.Equal(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if !strings.Contains(string(data), "readOnlyPort: 0") && strings.Contains(string(data), "readOnlyPort") {
		t.Errorf("readOnlyPort rendered non-zero:\n%s", data)
	}
}

func TestStaticPodManifest(t *testing.T) {
	pods := newPods("kl", 2)
	if pods[0].UID == pods[1].UID {
		t.Fatal("two pods share a UID")
	}
	data, err := staticPodManifest(pods[0], "tok123")
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := yaml.UnmarshalStrict(data, &got); err != nil {
		t.Fatalf("manifest does not decode: %v\n%s", err, data)
	}
	if got.Kind != "Pod" || got.APIVersion != "v1" {
		t.Errorf("kind %q apiVersion %q", got.Kind, got.APIVersion)
	}
	if got.UID != pods[0].UID {
		t.Errorf("uid %q, want the pod's %q (the kubelet keeps a manifest's uid)", got.UID, pods[0].UID)
	}
	if got.Annotations[benchTokenKey] != "tok123" {
		t.Errorf("annotations %v, want the token", got.Annotations)
	}
	// The same pod as podsync runs: image, command, pull policy, defaults.
	if diff := cmp.Diff(pods[0].Spec, got.Spec); diff != "" {
		t.Errorf("spec differs from newPods' (-want +got):\n%s", diff)
	}
	if pods[0].Annotations[benchTokenKey] != "" {
		t.Error("staticPodManifest changed the caller's pod")
	}
}

func TestKubeletScript(t *testing.T) {
	s := kubeletSettings{dir: "/b/k"}
	script := kubeletScript(s, func(sc string) string { return "/b/k/sysctl/" + sc })
	for _, sc := range localcri.KubeletSysctls {
		if want := "mount --bind /b/k/sysctl/" + sc + " /proc/sys/" + sc + "\n"; !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
	if !strings.Contains(script, "mount --bind /b/k/var-log-containers /var/log/containers\n") {
		t.Errorf("script does not hide /var/log/containers:\n%s", script)
	}
	if !strings.HasPrefix(script, "set -e\n") || !strings.HasSuffix(script, "exec \"$@\"\n") {
		t.Errorf("script must stop on a failed mount and exec the kubelet last:\n%s", script)
	}
}

func TestAddKubeletRatios(t *testing.T) {
	rr := newRunResult(10)
	rr.addKubeletRatios(80, 100, map[int]float64{10: 50})
	rr.addKubeletRatios(math.NaN(), 200, map[int]float64{})
	rr.addKubeletRatios(90, math.NaN(), map[int]float64{10: 50})
	if diff := cmp.Diff([]float64{0.8}, rr.kubeletRatio.vals); diff != "" {
		t.Errorf("podsync ÷ kubelet (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float64{2}, rr.kubeletFloor.vals); diff != "" {
		t.Errorf("kubelet ÷ floor (-want +got):\n%s", diff)
	}
}

func TestRenderKubeletTargets(t *testing.T) {
	r1, r10, r30, r100 := newRunResult(1), newRunResult(10), newRunResult(30), newRunResult(largeN)
	r1.kubeletRatio.add(1.5)
	for i := range minVerdictRounds {
		r10.kubeletRatio.add(0.8 - float64(i)/100)
		r30.kubeletRatio.add(0.9)
	}
	// Fewer rounds than a verdict needs: shown, not judged.
	r100.kubeletRatio.add(0.7)
	r100.kubeletRatio.add(0.75)
	fr := &flavourResult{flavour: "2", full: true, runs: []*runResult{r1, r10, r30, r100},
		restart: &restartResult{podsync: sample{vals: []float64{100}}, kubelet: sample{vals: []float64{600}}},
		idle: &idleResult{
			podsyncd: &idleRow{measuredOK: true, agentCPU: 0.1, ctrdCPU: 1, shimCPU: 0.5, rss: 30 << 20},
			kubelet:  &idleRow{measuredOK: true, agentCPU: 0.5, ctrdCPU: 1.2, shimCPU: 0.5, rss: 100 << 20},
			large:    &idleRow{measuredOK: true, agentCPU: 0.4},
		}}
	var w strings.Builder
	renderKubeletTargets(&w, &results{flavours: []*flavourResult{fr}})
	got := w.String()
	for _, want := range []string{
		"| RunPods ÷ kubelet, N = 1, containerd 2.x (shown, no target) | 1.50 | — |",
		"| RunPods ÷ kubelet, N = 10, containerd 2.x: ≤ 0.85 | 0.77 (0.74–0.80), 7 rounds | ✅ within |",
		"| RunPods ÷ kubelet, N = 30, containerd 2.x: ≤ 0.85 | 0.90 (0.90–0.90), 7 rounds | ❌ over |",
		"| RunPods ÷ kubelet, N = 100, containerd 2.x: ≤ 0.85 | 0.72 (0.70–0.75), 2 rounds | — (2 rounds; a verdict needs 7) |",
		"podsync ÷ kubelet (medians), containerd 2.x: ≤ 1/5 | 0.17 | ✅ within |",
		"podsyncd CPU ÷ kubelet CPU ≤ 1/4, containerd 2.x | 0.20 | ✅ within |",
		"podsyncd RSS ÷ kubelet RSS ≤ 1/2, containerd 2.x | 0.30 | ✅ within |",
		"| 1.600 vs 2.200 CPU-s/min | ✅ within |",
		// 0.4 CPU-s per minute is 0.67 % of a core.
		"250 pods: podsyncd ≤ 0.5 % of one core, containerd 2.x | 0.667 % of a core | ❌ over |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack %q:\n%s", want, got)
		}
	}
}

func TestRenderKubeletTargetsFailed(t *testing.T) {
	fr := &flavourResult{flavour: "1.6", restart: &restartResult{kubelet: sample{errs: []string{"did not start"}}},
		idle: &idleResult{kubelet: &idleRow{err: "did not start"}, podsyncd: &idleRow{measuredOK: true}}}
	res := &results{kubeletErr: "build the kubelet: no Go", flavours: []*flavourResult{fr}}
	var w strings.Builder
	renderKubeletTargets(&w, res)
	got := w.String()
	for _, want := range []string{
		"| the kubelet comparison | FAILED: build the kubelet: no Go | ❌ |",
		"containerd 1.6: ≤ 1/5 | — | — |",
		"podsyncd CPU ÷ kubelet CPU ≤ 1/4, containerd 1.6 | — | — |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack %q:\n%s", want, got)
		}
	}
	if !fr.kubeletFailed() || !res.sectionFailed() {
		t.Error("a kubelet that did not start must fail the run")
	}
}

func TestParseFlagsKubelet(t *testing.T) {
	cfg, err := parseFlags([]string{"-sections", "run,restart,idle", "-kubelet", "/k/kubelet"}, "/repo")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.sections["restart"] || !cfg.sections["idle"] || cfg.sections["api"] {
		t.Errorf("sections %v", cfg.sections)
	}
	if cfg.kubelet != "/k/kubelet" || cfg.idleWindow != time.Minute {
		t.Errorf("kubelet %q idle window %s", cfg.kubelet, cfg.idleWindow)
	}
	cfg, err = parseFlags([]string{"-quick"}, "/repo")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.idleWindow != 20*time.Second || !cfg.sections["idle"] || !cfg.sections["restart"] {
		t.Errorf("quick: idle window %s, sections %v", cfg.idleWindow, cfg.sections)
	}
	if _, err := parseFlags([]string{"-sections", "kubelet"}, "/repo"); err == nil || !strings.Contains(err.Error(), "restart, idle") {
		t.Errorf("unknown section: %v", err)
	}
}

// TestIdleSkippedAtDeadlineFailsNothing: the idle row the -deadline left
// out is listed with the failures, but fails neither the kubelet's
// comparison nor the run.
func TestIdleSkippedAtDeadlineFailsNothing(t *testing.T) {
	fr := &flavourResult{flavour: "2", full: true,
		idle: &idleResult{podsyncd: &idleRow{measuredOK: true}, kubelet: &idleRow{measuredOK: true},
			skipped: []string{"podsyncd with 250 pods skipped: the run passed its -deadline"}}}
	res := &results{flavours: []*flavourResult{fr}}
	if fr.kubeletFailed() || res.sectionFailed() {
		t.Error("a row skipped at the deadline failed the run")
	}
	var w strings.Builder
	renderFailures(&w, res)
	if want := "- containerd 2.x, idle node: podsyncd with 250 pods skipped: the run passed its -deadline"; !strings.Contains(w.String(), want) {
		t.Errorf("failures lack %q:\n%s", want, w.String())
	}
}

// TestRenderRestartFloor: the restart section shows the floor (the bench
// restarting the container itself) and its ratio to the kubelet beside
// podsync's, and a floor that failed leaves its ratio unjudged.
func TestRenderRestartFloor(t *testing.T) {
	fr := &flavourResult{flavour: "2", version: "containerd 2.x",
		restart: &restartResult{podsync: sample{vals: []float64{160}}, kubelet: sample{vals: []float64{800}}, floor: sample{vals: []float64{150}}}}
	var w strings.Builder
	renderRestart(&w, fr)
	got := w.String()
	for _, want := range []string{
		"| floor: the bench creates and starts the next container itself as the stop returns | 150 ms (150 ms–150 ms) |",
		"| podsync ÷ kubelet (medians) | 0.20 |",
		"| floor ÷ kubelet (medians): the least the ratio can be on this runtime | 0.19 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	fr.restart.floor = sample{}
	fr.restart.floor.fail(errors.New("RunPodSandbox: refused"))
	w.Reset()
	renderRestart(&w, fr)
	if strings.Contains(w.String(), "the least the ratio can be on this runtime | 0.") {
		t.Errorf("a failed floor's ratio is shown:\n%s", w.String())
	}
}
