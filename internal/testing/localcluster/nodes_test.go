package localcluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestSchedulable: a Node takes pods once Ready, uncordoned and free of
// Kubernetes' own NoSchedule and NoExecute taints — Ready alone is not
// enough while the node-lifecycle controller still has its not-ready
// taint on it; the node's own taints are its pods' to tolerate.
func TestSchedulable(t *testing.T) {
	ready := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "podsyncd is ready"}}}
	notReady := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Message: "podsyncd is unavailable"}}}
	taint := func(key string, e corev1.TaintEffect) []corev1.Taint { return []corev1.Taint{{Key: key, Effect: e}} }
	for _, tc := range []struct {
		name string
		node corev1.Node
		want bool
		why  string
	}{
		{"ready", corev1.Node{Status: ready}, true, ""},
		{"no Ready condition", corev1.Node{}, false, "no Ready condition"},
		{"not ready", corev1.Node{Status: notReady}, false, "Ready False: podsyncd is unavailable"},
		{"Ready Unknown, no message", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}},
			false, "Ready Unknown"},
		{"cordoned", corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: ready}, false, "cordoned"},
		{"ready, not-ready taint still on", corev1.Node{Spec: corev1.NodeSpec{Taints: taint("node.kubernetes.io/not-ready", corev1.TaintEffectNoSchedule)}, Status: ready},
			false, "tainted node.kubernetes.io/not-ready:NoSchedule"},
		{"unreachable", corev1.Node{Spec: corev1.NodeSpec{Taints: taint("node.kubernetes.io/unreachable", corev1.TaintEffectNoExecute)}, Status: ready},
			false, "tainted node.kubernetes.io/unreachable:NoExecute"},
		{"the node's own taint", corev1.Node{Spec: corev1.NodeSpec{Taints: taint("dedicated", corev1.TaintEffectNoSchedule)}, Status: ready}, true, ""},
		{"PreferNoSchedule", corev1.Node{Spec: corev1.NodeSpec{Taints: taint("node.kubernetes.io/memory-pressure", corev1.TaintEffectPreferNoSchedule)}, Status: ready}, true, ""},
	} {
		if ok, why := Schedulable(&tc.node); ok != tc.want || why != tc.why {
			t.Errorf("%s: Schedulable = %v, %q; want %v, %q", tc.name, ok, why, tc.want, tc.why)
		}
	}
}
