package admit

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Admission reasons of the node's scheduling fields, the kubelet's (the
// scheduler plugins' names it reports).
const (
	ReasonNodeAffinity    = "NodeAffinity"
	ReasonTaintToleration = "TaintToleration"
)

// The kubelet's messages: PredicateFailureError of
// pkg/kubelet/lifecycle/predicate.go around the scheduler plugins' reasons.
const (
	msgNodeAffinity    = "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
	msgTaintToleration = "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
)

// Admission reasons of the pod's operating system, the kubelet's
// (pkg/kubelet/lifecycle/predicate.go), with its messages.
const (
	ReasonPodOSSelectorNodeLabelDoesNotMatch = "PodOSSelectorNodeLabelDoesNotMatch"
	ReasonPodOSNotSupported                  = "PodOSNotSupported"

	msgPodOSSelector     = "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
	msgPodOSNotSupported = "Failed to admit pod as the OS field doesn't match node OS"
)

// checkPodOS is the kubelet's predicate admit handler's first checks,
// which no preemption can help: a pod labelled kubernetes.io/os for
// another OS than the node's (rejectPodAdmissionBasedOnOSSelector: the
// pod's label, not its node selector), then a pod whose spec.os.name is
// not the node's (rejectPodAdmissionBasedOnOSField). The node's OS is the
// one podsyncd runs on, as the kubelet's runtime.GOOS.
func checkPodOS(pod *corev1.Pod) Result {
	if os, ok := pod.Labels[corev1.LabelOSStable]; ok && os != runtime.GOOS {
		return reject(ReasonPodOSSelectorNodeLabelDoesNotMatch, "%s", msgPodOSSelector)
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != runtime.GOOS {
		return reject(ReasonPodOSNotSupported, "%s", msgPodOSNotSupported)
	}
	return Result{Admit: true}
}

// v1Node is the core/v1 Node the scheduling helpers match against: the
// node's name (for matchFields on metadata.name), labels and taints.
func (n Node) v1Node() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Taints: n.Taints},
	}
}

// checkNodeAffinity is the scheduler's NodeAffinity filter as the kubelet
// runs it at admission (scheduler.AdmissionCheck): spec.nodeSelector and
// the required node affinity must both match the node's labels and name.
// Preferred node affinity only scores, so it is not checked. A selector
// that does not parse does not match, as in the kubelet.
func checkNodeAffinity(pod *corev1.Pod, node Node) Result {
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node.v1Node()); !ok {
		return reject(ReasonNodeAffinity, "%s", msgNodeAffinity)
	}
	return Result{Admit: true}
}

// checkTaints refuses a pod that does not tolerate one of the node's
// NoExecute or NoSchedule taints. The kubelet checks only NoExecute
// taints, leaving NoSchedule to the scheduler; podsync has no scheduler,
// so its admission checks both. The message names the first taint not
// tolerated.
func checkTaints(pod *corev1.Pod, node Node) Result {
	taint, untolerated := schedcorev1.FindMatchingUntoleratedTaint(klog.Logger{}, node.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute || t.Effect == corev1.TaintEffectNoSchedule
	}, true)
	if untolerated {
		return reject(ReasonTaintToleration, "%s (%s)", msgTaintToleration, taintString(taint))
	}
	return Result{Admit: true}
}

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// NodeLabels returns the node's labels: the operator's, then the ones the
// kubelet sets itself (kubernetes.io/hostname, kubernetes.io/os,
// kubernetes.io/arch), which win, as the kubelet's do over
// --node-labels.
func NodeLabels(hostname, goos, goarch string, operator map[string]string) map[string]string {
	out := make(map[string]string, len(operator)+3)
	for k, v := range operator {
		out[k] = v
	}
	out[corev1.LabelHostname] = hostname
	out[corev1.LabelOSStable] = goos
	out[corev1.LabelArchStable] = goarch
	return out
}

// CheckNodeLabels checks the operator's node labels (--node-labels):
// keys are qualified names, values label values, and the labels podsyncd
// sets itself (NodeLabels) cannot be given.
func CheckNodeLabels(labels map[string]string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		switch k {
		case corev1.LabelHostname, corev1.LabelOSStable, corev1.LabelArchStable:
			errs = append(errs, fmt.Errorf("label %q: set by podsyncd itself", k))
			continue
		}
		if err := checkLabel(k, labels[k]); err != nil {
			errs = append(errs, fmt.Errorf("label %s=%s: %w", k, labels[k], err))
		}
	}
	return errors.Join(errs...)
}

// ParseTaint parses "key[=value]:Effect", as the kubelet's
// --register-with-taints; Effect is NoSchedule, PreferNoSchedule or
// NoExecute.
func ParseTaint(spec string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(strings.TrimSpace(spec), ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("taint %q: want key[=value]:Effect", spec)
	}
	k, v, _ := strings.Cut(kv, "=")
	if err := checkLabel(k, v); err != nil {
		return corev1.Taint{}, fmt.Errorf("taint %q: %w", spec, err)
	}
	switch e := corev1.TaintEffect(effect); e {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return corev1.Taint{Key: k, Value: v, Effect: e}, nil
	default:
		return corev1.Taint{}, fmt.Errorf("taint %q: effect %q: want NoSchedule, PreferNoSchedule or NoExecute", spec, effect)
	}
}

func checkLabel(k, v string) error {
	if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
		return fmt.Errorf("key %q: %s", k, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
		return fmt.Errorf("value %q: %s", v, strings.Join(msgs, "; "))
	}
	return nil
}
