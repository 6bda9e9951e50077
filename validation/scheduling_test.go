package validation_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func nodeAffinity(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

func matchExpr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// TestValidateScheduling ports the API server's validateTolerations,
// ValidateNodeSelector and validateNodeAffinity cases that podsync's
// admission relies on (k8s.io/kubernetes pkg/apis/core/validation).
func TestValidateScheduling(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"chart defaults", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
			p.Spec.Tolerations = []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "dedicated", Value: "db"},
				{Operator: corev1.TolerationOpExists},
			}
			p.Spec.Affinity = nodeAffinity(matchExpr("kubernetes.io/arch", corev1.NodeSelectorOpIn, "amd64"), matchExpr("rank", corev1.NodeSelectorOpGt, "3"),
				corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}})
			p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: matchExpr("disk", corev1.NodeSelectorOpExists)}}
		}, nil},
		{"nodeSelector key", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"-bad": "x"} }, []string{"spec.nodeSelector"}},
		{"nodeSelector value", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "s s d"} }, []string{"spec.nodeSelector"}},
		{"toleration without key not Exists", func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Value: "x"}} }, []string{"spec.tolerations[0].operator"}},
		{"toleration key", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "a b", Operator: corev1.TolerationOpExists}}
		}, []string{"spec.tolerations[0].key"}},
		{"toleration Exists with a value", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}
		}, []string{"spec.tolerations[0].value"}},
		{"toleration operator", func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: "Like"}} }, []string{"spec.tolerations[0].operator"}},
		{"toleration effect", func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Effect: "NoRun"}} }, []string{"spec.tolerations[0].effect"}},
		{"tolerationSeconds without NoExecute", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](1)}}
		}, []string{"spec.tolerations[0].effect"}},
		{"no node selector terms", func(p *corev1.Pod) { p.Spec.Affinity = nodeAffinity() },
			[]string{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"}},
		{"In without values", func(p *corev1.Pod) { p.Spec.Affinity = nodeAffinity(matchExpr("k", corev1.NodeSelectorOpIn)) },
			[]string{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values"}},
		{"Exists with values", func(p *corev1.Pod) { p.Spec.Affinity = nodeAffinity(matchExpr("k", corev1.NodeSelectorOpExists, "v")) },
			[]string{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values"}},
		{"Gt not an integer", func(p *corev1.Pod) { p.Spec.Affinity = nodeAffinity(matchExpr("k", corev1.NodeSelectorOpGt, "many")) },
			[]string{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]"}},
		{"unknown operator", func(p *corev1.Pod) { p.Spec.Affinity = nodeAffinity(matchExpr("k", "Near", "v")) },
			[]string{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator"}},
		{"matchFields on a label", func(p *corev1.Pod) {
			p.Spec.Affinity = nodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.labels", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}}}})
		}, []string{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key"}},
		{"preferred weight", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 0, Preference: matchExpr("k", corev1.NodeSelectorOpExists)}}}}
		}, []string{"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkPaths(t, validatePod(pod(tt.mutate), options()), tt.want)
		})
	}
}
