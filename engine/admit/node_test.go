package admit

import (
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func required(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// TestAdmitNodeFields ports the node-facing rows of the kubelet's
// TestGeneralPredicates (pkg/kubelet/lifecycle/predicate_test.go) and the
// scheduler's NodeAffinity filter rows that matter on one node.
func TestAdmitNodeFields(t *testing.T) {
	node := Node{
		Name:   "machine1",
		Labels: NodeLabels("machine1", "linux", "amd64", map[string]string{"foo": "bar", "zone": "a"}),
	}
	tainted := func(taints ...corev1.Taint) Node {
		n := node
		n.Taints = taints
		return n
	}
	noSched := corev1.Taint{Key: "foo", Effect: corev1.TaintEffectNoSchedule}
	noExec := corev1.Taint{Key: "bar", Effect: corev1.TaintEffectNoExecute}
	tests := []struct {
		name   string
		spec   func(*corev1.PodSpec)
		node   Node
		reason string
	}{
		{name: "no scheduling fields", spec: func(*corev1.PodSpec) {}, node: node},
		{name: "nodeSelector matches", spec: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"foo": "bar"} }, node: node},
		{name: "nodeSelector on the automatic os label", spec: func(s *corev1.PodSpec) {
			s.NodeSelector = map[string]string{corev1.LabelOSStable: "linux", corev1.LabelHostname: "machine1"}
		}, node: node},
		// The attack-style row: a label the node lacks.
		{name: "nodeSelector for a label the node lacks", spec: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"gpu": "true"} }, node: node, reason: ReasonNodeAffinity},
		{name: "nodeSelector value differs", spec: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"foo": "baz"} }, node: node, reason: ReasonNodeAffinity},
		{name: "required affinity Exists", spec: func(s *corev1.PodSpec) { s.Affinity = required(expr("foo", corev1.NodeSelectorOpExists)) }, node: node},
		{name: "required affinity In", spec: func(s *corev1.PodSpec) { s.Affinity = required(expr("zone", corev1.NodeSelectorOpIn, "b", "a")) }, node: node},
		{name: "required affinity NotIn", spec: func(s *corev1.PodSpec) { s.Affinity = required(expr("zone", corev1.NodeSelectorOpNotIn, "a")) }, node: node, reason: ReasonNodeAffinity},
		{name: "required affinity DoesNotExist", spec: func(s *corev1.PodSpec) { s.Affinity = required(expr("foo", corev1.NodeSelectorOpDoesNotExist)) }, node: node, reason: ReasonNodeAffinity},
		{name: "terms are ORed", spec: func(s *corev1.PodSpec) {
			s.Affinity = required(expr("gpu", corev1.NodeSelectorOpExists), expr("foo", corev1.NodeSelectorOpExists))
		}, node: node},
		{name: "matchFields on metadata.name", spec: func(s *corev1.PodSpec) {
			s.Affinity = required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"machine1"}}}})
		}, node: node},
		{name: "matchFields on another node's name", spec: func(s *corev1.PodSpec) {
			s.Affinity = required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"machine2"}}}})
		}, node: node, reason: ReasonNodeAffinity},
		{name: "nodeSelector and affinity must both match", spec: func(s *corev1.PodSpec) {
			s.NodeSelector = map[string]string{"foo": "bar"}
			s.Affinity = required(expr("gpu", corev1.NodeSelectorOpExists))
		}, node: node, reason: ReasonNodeAffinity},
		{name: "preferred affinity only scores", spec: func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: expr("gpu", corev1.NodeSelectorOpExists)}}}}
		}, node: node},
		{name: "pod anti-affinity is ignored", spec: func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname}}}}
		}, node: node},
		{name: "taint/toleration match", spec: func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{{Key: "foo"}, {Key: "bar"}} }, node: tainted(noSched, noExec)},
		{name: "NoExecute taint/toleration not match", spec: func(*corev1.PodSpec) {}, node: tainted(noExec), reason: ReasonTaintToleration},
		// The kubelet leaves NoSchedule to the scheduler and admits this
		// pod; podsync has none, so it refuses.
		{name: "NoSchedule taint/toleration not match", spec: func(*corev1.PodSpec) {}, node: tainted(noSched), reason: ReasonTaintToleration},
		{name: "PreferNoSchedule taint/toleration not match", spec: func(*corev1.PodSpec) {}, node: tainted(corev1.Taint{Key: "baz", Effect: corev1.TaintEffectPreferNoSchedule})},
		{name: "toleration Equal with value", spec: func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}
		}, node: tainted(corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule})},
		{name: "toleration Equal with another value", spec: func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web"}}
		}, node: tainted(corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}), reason: ReasonTaintToleration},
		{name: "toleration of another effect", spec: func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "bar", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}, node: tainted(noExec), reason: ReasonTaintToleration},
		{name: "empty key Exists tolerates everything", spec: func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }, node: tainted(noSched, noExec)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("p", nil)
			tc.spec(&p.Spec)
			r := Admit(p, nil, tc.node, Policy{})
			if r.Admit != (tc.reason == "") || r.Reason != tc.reason {
				t.Fatalf("Admit = %+v, want reason %q", r, tc.reason)
			}
		})
	}
}

func TestAdmitNodeFieldMessagesAreTheKubelets(t *testing.T) {
	p := pod("p", nil)
	p.Spec.NodeSelector = map[string]string{"gpu": "true"}
	r := Admit(p, nil, Node{Name: "n", Labels: NodeLabels("n", "linux", "amd64", nil)}, Policy{})
	if want := "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"; r.Message != want {
		t.Errorf("NodeAffinity message = %q, want %q", r.Message, want)
	}
	r = Admit(pod("p", nil), nil, Node{Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute}}}, Policy{})
	if want := "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate (k=v:NoExecute)"; r.Message != want {
		t.Errorf("TaintToleration message = %q, want %q", r.Message, want)
	}
}

// TestAdmitPodOS is the kubelet's TestRejectPodAdmissionBasedOnOSField and
// TestRejectPodAdmissionBasedOnOSSelector (pkg/kubelet/lifecycle/
// predicate_test.go), through Admit, with the kubelet's reasons and
// messages (node-conformance's PodOSRejection test waits for the reason);
// the OS checks come before the resources', which no preemption helps.
func TestAdmitPodOS(t *testing.T) {
	node := Node{Name: "n", Labels: NodeLabels("n", runtime.GOOS, runtime.GOARCH, nil), Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	other := "windows"
	if runtime.GOOS == other {
		other = "linux"
	}
	tests := []struct {
		name            string
		mutate          func(*corev1.Pod)
		reason, message string
	}{
		{"no os: the pod count decides", func(*corev1.Pod) {}, ReasonOutOfPods, ""},
		{"spec.os of the node", func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.OSName(runtime.GOOS)} }, ReasonOutOfPods, ""},
		{"spec.os of another OS", func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.OSName(other)} },
			ReasonPodOSNotSupported, "Failed to admit pod as the OS field doesn't match node OS"},
		{"the os label of the node", func(p *corev1.Pod) { p.Labels = map[string]string{corev1.LabelOSStable: runtime.GOOS} }, ReasonOutOfPods, ""},
		{"the os label of another OS", func(p *corev1.Pod) { p.Labels = map[string]string{corev1.LabelOSStable: other} },
			ReasonPodOSSelectorNodeLabelDoesNotMatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{"both for another OS: the label first", func(p *corev1.Pod) {
			p.Labels = map[string]string{corev1.LabelOSStable: other}
			p.Spec.OS = &corev1.PodOS{Name: corev1.OSName(other)}
		}, ReasonPodOSSelectorNodeLabelDoesNotMatch, ""},
		// A nodeSelector is the node affinity check's, as on the kubelet.
		{"a nodeSelector on another OS", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: other}
		}, ReasonOutOfPods, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("p", nil)
			tc.mutate(p)
			r := Admit(p, nil, node, Policy{})
			if r.Admit || r.Reason != tc.reason || (tc.message != "" && r.Message != tc.message) {
				t.Errorf("Admit = %+v, want reason %q, message %q", r, tc.reason, tc.message)
			}
			if tc.reason == ReasonOutOfPods {
				return
			}
			if r := CheckPod(p, node, Policy{}); r.Reason != tc.reason {
				t.Errorf("CheckPod = %+v, want reason %q", r, tc.reason)
			}
		})
	}
}

func TestNodeLabels(t *testing.T) {
	got := NodeLabels("h", "linux", "arm64", map[string]string{"a": "1", corev1.LabelOSStable: "windows"})
	want := map[string]string{"a": "1", corev1.LabelHostname: "h", corev1.LabelOSStable: "linux", corev1.LabelArchStable: "arm64"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("NodeLabels (-want +got):\n%s", d)
	}
}

func TestCheckNodeLabelsAndParseTaint(t *testing.T) {
	if err := CheckNodeLabels(map[string]string{"disk": "ssd", "example.com/zone": "a", "empty": ""}); err != nil {
		t.Errorf("CheckNodeLabels of good labels: %v", err)
	}
	for _, bad := range []map[string]string{{"Bad Key": "v"}, {"k": "bad value"}, {corev1.LabelHostname: "other"}} {
		if err := CheckNodeLabels(bad); err == nil {
			t.Errorf("CheckNodeLabels(%v) = nil error", bad)
		}
	}
	for spec, want := range map[string]corev1.Taint{
		"dedicated=db:NoSchedule": {Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule},
		"maintenance:NoExecute":   {Key: "maintenance", Effect: corev1.TaintEffectNoExecute},
		"soft=1:PreferNoSchedule": {Key: "soft", Value: "1", Effect: corev1.TaintEffectPreferNoSchedule},
	} {
		got, err := ParseTaint(spec)
		if err != nil || got != want {
			t.Errorf("ParseTaint(%q) = %+v, %v, want %+v", spec, got, err, want)
		}
	}
	for _, bad := range []string{"k=v", "k=v:Sometimes", ":NoSchedule"} {
		if _, err := ParseTaint(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseTaint(%q) error = %v, want one naming the taint", bad, err)
		}
	}
}
