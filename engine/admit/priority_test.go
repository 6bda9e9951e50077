package admit

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestResolvePriority(t *testing.T) {
	classes := map[string]int32{"high": 1000, "low": -5}
	tests := []struct {
		name       string
		class      string
		priority   *int32
		want       int32
		wantReason string
	}{
		{"no class is 0", "", nil, 0, ""},
		{"system-node-critical", SystemNodeCritical, nil, 2000001000, ""},
		{"system-cluster-critical", SystemClusterCritical, nil, 2000000000, ""},
		{"a configured class", "high", nil, 1000, ""},
		{"a negative configured class", "low", nil, -5, ""},
		{"an unknown class is refused", "medium", nil, 0, ReasonPriorityClass},
		{"a priority equal to the class's is kept", "high", ptr.To[int32](1000), 1000, ""},
		{"a priority other than the class's is refused", "high", ptr.To[int32](7), 7, ReasonPriorityClass},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod("a", nil)
			p.Spec.PriorityClassName, p.Spec.Priority = tt.class, tt.priority
			r := ResolvePriority(p, classes)
			if r.Reason != tt.wantReason || r.Admit != (tt.wantReason == "") {
				t.Fatalf("ResolvePriority = %+v, want reason %q", r, tt.wantReason)
			}
			if tt.wantReason == "" && PodPriority(p) != tt.want {
				t.Errorf("priority = %d, want %d", PodPriority(p), tt.want)
			}
		})
	}
	p := pod("a", nil)
	p.Spec.PriorityClassName = "medium"
	r := ResolvePriority(p, classes)
	for _, want := range []string{"medium", "high, low", "--priority-classes medium=VALUE"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("message %q does not say %q", r.Message, want)
		}
	}
}

func TestParsePriorityClasses(t *testing.T) {
	got, err := ParsePriorityClasses(map[string]string{"high": "1000", "low": " -10", "batch": "0"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int32{"high": 1000, "low": -10, "batch": 0}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []map[string]string{{"high": ""}, {"": "1"}, {"high": "x"}, {"high": "1.5"}, {"system-x": "1"},
		{"huge": "1000000001"}, {"Bad_Name": "1"}, {"low": "-2147483649"}} {
		if _, err := ParsePriorityClasses(bad); err == nil {
			t.Errorf("ParsePriorityClasses(%v) succeeded", bad)
		}
	}
}

// The pods of the kubelet's preemption tests (pkg/kubelet/preemption).
func preemptionPods() map[string]*corev1.Pod {
	withLimits := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.Containers[0].Resources.Limits = p.Spec.Containers[0].Resources.Requests.DeepCopy()
		return p
	}
	critical := func(p *corev1.Pod, prio int32) *corev1.Pod {
		p.Spec.Priority = &prio
		return p
	}
	return map[string]*corev1.Pod{
		"tinyBurstable":         pod("tinyBurstable", rl("cpu", "1m", "memory", "1Mi")),
		"bestEffort":            pod("bestEffort", nil),
		"clusterCritical":       critical(pod("clusterCritical", rl("cpu", "100m", "memory", "100Mi")), SystemCriticalPriority),
		"nodeCritical":          critical(pod("nodeCritical", rl("cpu", "100m", "memory", "100Mi")), SystemCriticalPriority+100),
		"burstable":             pod("burstable", rl("cpu", "100m", "memory", "100Mi")),
		"guaranteed":            withLimits(pod("guaranteed", rl("cpu", "100m", "memory", "100Mi"))),
		"highRequestBurstable":  pod("highRequestBurstable", rl("cpu", "300m", "memory", "300Mi")),
		"highRequestGuaranteed": withLimits(pod("highRequestGuaranteed", rl("cpu", "300m", "memory", "300Mi"))),
	}
}

func requirements(cpu, memoryMi, pods int64) []Requirement {
	var out []Requirement
	if cpu > 0 {
		out = append(out, Requirement{Name: corev1.ResourceCPU, Quantity: cpu})
	}
	if memoryMi > 0 {
		out = append(out, Requirement{Name: corev1.ResourceMemory, Quantity: memoryMi << 20})
	}
	if pods > 0 {
		out = append(out, Requirement{Name: corev1.ResourcePods, Quantity: pods})
	}
	return out
}

// TestPodsToPreempt is the kubelet's TestGetPodsToPreempt table.
func TestPodsToPreempt(t *testing.T) {
	all := preemptionPods()
	pods := func(names ...string) []*corev1.Pod {
		var out []*corev1.Pod
		for _, n := range names {
			out = append(out, all[n])
		}
		return out
	}
	tests := []struct {
		name      string
		preemptor string
		input     []string
		reqs      []Requirement
		wantErr   bool
		want      []string
	}{
		{"no requirements", "clusterCritical", nil, requirements(0, 0, 0), false, nil},
		{"no pods", "clusterCritical", nil, requirements(0, 0, 1), true, nil},
		{"equal pods and resources requirements", "clusterCritical", []string{"burstable"}, requirements(100, 100, 1), false, []string{"burstable"}},
		{"higher requirements than pod requests", "clusterCritical", []string{"burstable"}, requirements(200, 200, 2), true, nil},
		{"choose between bestEffort and burstable", "clusterCritical", []string{"burstable", "bestEffort"}, requirements(0, 0, 1), false, []string{"bestEffort"}},
		{"choose between burstable and guaranteed", "clusterCritical", []string{"burstable", "guaranteed"}, requirements(0, 0, 1), false, []string{"burstable"}},
		{"choose lower request burstable if it meets requirements", "clusterCritical",
			[]string{"bestEffort", "highRequestBurstable", "burstable"}, requirements(100, 100, 0), false, []string{"burstable"}},
		{"choose higher request burstable if lower does not meet requirements", "clusterCritical",
			[]string{"bestEffort", "burstable", "highRequestBurstable"}, requirements(150, 150, 0), false, []string{"highRequestBurstable"}},
		{"multiple pods required", "clusterCritical",
			[]string{"bestEffort", "burstable", "highRequestBurstable", "guaranteed", "highRequestGuaranteed"}, requirements(350, 350, 0), false,
			[]string{"burstable", "highRequestBurstable"}},
		{"evict guaranteed when we have to, and dont evict the extra burstable", "clusterCritical",
			[]string{"bestEffort", "burstable", "highRequestBurstable", "guaranteed", "highRequestGuaranteed"}, requirements(0, 550, 0), false,
			[]string{"highRequestBurstable", "highRequestGuaranteed"}},
		{"evict cluster critical pod for node critical pod", "nodeCritical", []string{"clusterCritical"}, requirements(100, 0, 0), false, []string{"clusterCritical"}},
		{"can not evict node critical pod for cluster critical pod", "clusterCritical", []string{"nodeCritical"}, requirements(100, 0, 0), true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := podsToPreempt(all[tt.preemptor], pods(tt.input...), tt.reqs)
			if (err != nil) != tt.wantErr {
				t.Fatalf("podsToPreempt error = %v, want error %v", err, tt.wantErr)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			// The kubelet's podListEqual ignores the order.
			slices.Sort(names)
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreemption: a critical pod refused for resources only gets victims;
// a pod that is not critical, or refused for another reason, gets none.
func TestPreemption(t *testing.T) {
	full := Node{Allocatable: rl("cpu", "1", "memory", "1Gi", "pods", "3")}
	critical := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.PriorityClassName = SystemNodeCritical
		ResolvePriority(p, nil)
		return p
	}
	others := []*corev1.Pod{pod("be", nil), pod("small", rl("cpu", "200m")), pod("big", rl("cpu", "700m"))}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		node        Node
		wantVictims []string
		wantReason  string
	}{
		{"a critical pod preempts the pod count", critical(pod("c", nil)), full, []string{"be"}, ReasonOutOfPods},
		{"a critical pod preempts for cpu", critical(pod("c", rl("cpu", "500m"))),
			Node{Allocatable: rl("cpu", "1", "pods", "10")}, []string{"big"}, ReasonOutOfCPU},
		{"a pod that is not critical preempts nothing", pod("c", rl("cpu", "500m")),
			Node{Allocatable: rl("cpu", "1", "pods", "10")}, nil, ReasonOutOfCPU},
		{"a critical pod that fits preempts nothing", critical(pod("c", rl("cpu", "100m"))),
			Node{Allocatable: rl("cpu", "1", "pods", "10")}, nil, ""},
		{"no preemption for a taint", critical(pod("c", rl("cpu", "500m"))),
			Node{Allocatable: rl("cpu", "1", "pods", "10"), Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}}, nil, ReasonTaintToleration},
		{"nothing frees enough", critical(pod("c", rl("cpu", "2"))),
			Node{Allocatable: rl("cpu", "1", "pods", "10")}, nil, ReasonOutOfCPU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			victims, r := Preemption(tt.pod, others, tt.node, openPolicy)
			if r.Reason != tt.wantReason {
				t.Errorf("reason = %q (%s), want %q", r.Reason, r.Message, tt.wantReason)
			}
			var names []string
			for _, p := range victims {
				names = append(names, p.Name)
			}
			if diff := cmp.Diff(tt.wantVictims, names); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
		})
	}
}
