package admit

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podsync/podsync/engine/model"
)

// The built-in priority classes (scheduling.k8s.io's system classes) and
// the kubelet's threshold of a critical pod (kubetypes.IsCriticalPod).
const (
	SystemNodeCritical            = "system-node-critical"
	SystemClusterCritical         = "system-cluster-critical"
	SystemNodeCriticalPriority    = 2000001000
	SystemClusterCriticalPriority = 2000000000
	SystemCriticalPriority        = 2000000000
)

// ReasonPriorityClass refuses a pod whose priorityClassName the node does
// not know, or whose spec.priority is not its class's value.
const ReasonPriorityClass = "PriorityClassNotFound"

// PriorityOf is the priority of pod's priorityClassName, as the API
// server's Priority admission plugin computes it: a built-in class, or one
// of classes (podsyncd's --priority-classes); no class is priority 0. A
// spec.priority already set must be the class's value. It returns a
// rejection for an unknown class or a different priority.
func PriorityOf(pod *corev1.Pod, classes map[string]int32) (int32, Result) {
	name := pod.Spec.PriorityClassName
	var value int32
	switch name {
	case "":
	case SystemNodeCritical:
		value = SystemNodeCriticalPriority
	case SystemClusterCritical:
		value = SystemClusterCriticalPriority
	default:
		v, ok := classes[name]
		if !ok {
			known := slices.Sorted(maps.Keys(classes))
			hint := "declare it with podsyncd's --priority-classes " + name + "=VALUE"
			if len(known) > 0 {
				hint = "use one of system-node-critical, system-cluster-critical, " + strings.Join(known, ", ") + ", or " + hint
			} else {
				hint = "use system-node-critical or system-cluster-critical, or " + hint
			}
			return 0, reject(ReasonPriorityClass, "no PriorityClass with name %s was found: %s", name, hint)
		}
		value = v
	}
	if p := pod.Spec.Priority; p != nil && *p != value {
		return 0, reject(ReasonPriorityClass, "the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *p, value)
	}
	return value, Result{Admit: true}
}

// ResolvePriority sets pod.Spec.Priority from its class (PriorityOf) when
// it is unset, as the API server's Priority admission plugin does before
// the pod reaches a node; a pod whose priority is set is not written. It
// returns PriorityOf's rejection.
func ResolvePriority(pod *corev1.Pod, classes map[string]int32) Result {
	v, r := PriorityOf(pod, classes)
	if r.Admit && pod.Spec.Priority == nil {
		pod.Spec.Priority = &v
	}
	return r
}

// PodPriority is the pod's priority (corev1helpers.PodPriority): its
// spec.priority, 0 when unset.
func PodPriority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// IsCriticalPod is the kubelet's kubetypes.IsCriticalPod: a static or
// mirror pod, or one of priority at least SystemCriticalPriority. podsync
// has no static pods of its own (the manifest directory's pods are
// applied as any other), so only the priority counts.
func IsCriticalPod(pod *corev1.Pod) bool {
	return PodPriority(pod) >= SystemCriticalPriority
}

// Preemptable is the kubelet's kubetypes.Preemptable: a critical pod
// preempts a non-critical one; otherwise a pod preempts one of lower
// priority.
func Preemptable(preemptor, preemptee *corev1.Pod) bool {
	if IsCriticalPod(preemptor) && !IsCriticalPod(preemptee) {
		return true
	}
	return PodPriority(preemptor) > PodPriority(preemptee)
}

// ParsePriorityClasses parses podsyncd's --priority-classes NAME=VALUE
// pairs. A name must be a DNS-1123 subdomain not starting with "system-"
// (those are the API server's), and a value an integer of at most
// 1000000000, as for a user-defined PriorityClass.
func ParsePriorityClasses(classes map[string]string) (map[string]int32, error) {
	out := map[string]int32{}
	for _, name := range slices.Sorted(maps.Keys(classes)) {
		v := strings.TrimSpace(classes[name])
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return nil, fmt.Errorf("priority class %q: %s", name, strings.Join(msgs, "; "))
		}
		if strings.HasPrefix(name, "system-") {
			return nil, fmt.Errorf("priority class %q: names starting with system- are the built-in classes'", name)
		}
		value, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("priority class %q: value %q is not a 32-bit integer", name, v)
		}
		if value > 1000000000 {
			return nil, fmt.Errorf("priority class %q: value %d is above 1000000000, the highest a class other than the system ones may have", name, value)
		}
		out[name] = int32(value)
	}
	return out, nil
}

// Requirement is a resource a pod lacks to be admitted: how much more of
// it the node would need (the kubelet's admissionRequirement).
type Requirement struct {
	Name     corev1.ResourceName
	Quantity int64
}

// ReasonPreempting and MessagePreempted are the kubelet's status of a pod
// preempted for a critical pod (events.PreemptContainer and the
// preemption message).
const (
	ReasonPreempting = "Preempting"
	MessagePreempted = "Preempted in order to admit critical pod"
)

// Preemption is the kubelet's CriticalPodAdmissionHandler: when a critical
// pod is refused by Admit for resources only (pods, cpu, memory,
// ephemeral storage, extended resources), it returns the active pods to
// preempt so that it fits, chosen as the kubelet's getPodsToPreempt
// chooses them. It returns nil and Admit's result when the pod is
// admitted, is not critical, is refused for another reason, or when no
// set of preemptable pods would free enough (the result's message then
// says what cannot be reclaimed). Priorities are the pods' spec.priority,
// which ResolvePriority sets.
func Preemption(pod *corev1.Pod, others []*corev1.Pod, node Node, p Policy) ([]*corev1.Pod, Result) {
	r := Admit(pod, others, node, p)
	if r.Admit || !IsCriticalPod(pod) || !isResourceReason(r.Reason) {
		return nil, r
	}
	active := activeOthers(pod, others)
	// The other predicates must hold: only resources may be freed.
	if o := checkNodeAffinity(pod, node); !o.Admit {
		return nil, o
	}
	if o := fitsPorts(pod, active); !o.Admit {
		return nil, o
	}
	if o := checkTaints(pod, node); !o.Admit {
		return nil, o
	}
	victims, err := podsToPreempt(pod, active, insufficient(pod, active, node))
	if err != nil {
		r.Message += "; preemption: " + err.Error()
		return nil, r
	}
	return victims, r
}

func isResourceReason(reason string) bool {
	return strings.HasPrefix(reason, "OutOf")
}

func activeOthers(pod *corev1.Pod, others []*corev1.Pod) []*corev1.Pod {
	var active []*corev1.Pod
	for _, o := range others {
		if o.UID == pod.UID || o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed {
			continue
		}
		active = append(active, o)
	}
	return active
}

// insufficient lists every resource the pod lacks, as the kubelet's
// noderesources fit reports them (InsufficientResourceError): the pod
// count, then each requested resource in name order.
func insufficient(pod *corev1.Pod, active []*corev1.Pod, node Node) []Requirement {
	var out []Requirement
	maxPods := int64(DefaultMaxPods)
	if q, ok := node.Allocatable[corev1.ResourcePods]; ok {
		maxPods = q.Value()
	}
	if n := int64(len(active)) + 1; n > maxPods {
		out = append(out, Requirement{Name: corev1.ResourcePods, Quantity: n - maxPods})
	}
	want := podRequests(pod)
	used := corev1.ResourceList{}
	for _, o := range active {
		addTo(used, podRequests(o))
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		capacity, limited := node.allocatable(name)
		if !limited {
			continue
		}
		req, u := want[name], used[name]
		short := quantityValue(name, req) - (quantityValue(name, capacity) - quantityValue(name, u))
		if short > 0 && !req.IsZero() {
			out = append(out, Requirement{Name: name, Quantity: short})
		}
	}
	return out
}

// quantityValue is a quantity as the kubelet compares it: millicores for
// cpu, units for the rest.
func quantityValue(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// podRequest is the kubelet's resource.GetResourceRequest: the pod's
// request of name (millicores for cpu), 1 for pods.
func podRequest(pod *corev1.Pod, name corev1.ResourceName) int64 {
	if name == corev1.ResourcePods {
		return 1
	}
	q, ok := podRequests(pod)[name]
	if !ok {
		return 0
	}
	return quantityValue(name, q)
}

// podsToPreempt is the kubelet's getPodsToPreempt.
func podsToPreempt(pod *corev1.Pod, pods []*corev1.Pod, reqs []Requirement) ([]*corev1.Pod, error) {
	bestEffort, burstable, guaranteed := sortPodsByQOS(pod, pods)
	all := slices.Concat(bestEffort, burstable, guaranteed)
	if left := subtract(reqs, all...); len(left) > 0 {
		return nil, fmt.Errorf("no set of running pods found to reclaim resources: %s", requirementsString(left))
	}
	guaranteedToEvict, err := podsToPreemptByDistance(guaranteed, subtract(reqs, slices.Concat(bestEffort, burstable)...))
	if err != nil {
		return nil, err
	}
	burstableToEvict, err := podsToPreemptByDistance(burstable, subtract(reqs, slices.Concat(bestEffort, guaranteedToEvict)...))
	if err != nil {
		return nil, err
	}
	bestEffortToEvict, err := podsToPreemptByDistance(bestEffort, subtract(reqs, slices.Concat(burstableToEvict, guaranteedToEvict)...))
	if err != nil {
		return nil, err
	}
	return slices.Concat(bestEffortToEvict, burstableToEvict, guaranteedToEvict), nil
}

// podsToPreemptByDistance is the kubelet's getPodsToPreemptByDistance:
// round by round, the pod closest to the remaining requirements (the
// smaller request on a tie).
func podsToPreemptByDistance(pods []*corev1.Pod, reqs []Requirement) ([]*corev1.Pod, error) {
	pods = slices.Clone(pods)
	var out []*corev1.Pod
	for len(reqs) > 0 {
		if len(pods) == 0 {
			return nil, fmt.Errorf("no set of running pods found to reclaim resources: %s", requirementsString(reqs))
		}
		best, bestDist := 0, float64(len(reqs)+1)
		for i, p := range pods {
			d := distance(reqs, p)
			if d < bestDist || (d == bestDist && smallerResourceRequest(p, pods[best])) {
				best, bestDist = i, d
			}
		}
		reqs = subtract(reqs, pods[best])
		out = append(out, pods[best])
		pods[best] = pods[len(pods)-1]
		pods = pods[:len(pods)-1]
	}
	return out, nil
}

func distance(reqs []Requirement, pod *corev1.Pod) float64 {
	d := 0.0
	for _, r := range reqs {
		if remaining := float64(r.Quantity - podRequest(pod, r.Name)); remaining > 0 {
			f := remaining / float64(r.Quantity)
			d += f * f
		}
	}
	return d
}

func subtract(reqs []Requirement, pods ...*corev1.Pod) []Requirement {
	var out []Requirement
	for _, r := range reqs {
		q := r.Quantity
		for _, p := range pods {
			if q -= podRequest(p, r.Name); q <= 0 {
				break
			}
		}
		if q > 0 {
			out = append(out, Requirement{Name: r.Name, Quantity: q})
		}
	}
	return out
}

func requirementsString(reqs []Requirement) string {
	parts := make([]string, len(reqs))
	for i, r := range reqs {
		parts[i] = fmt.Sprintf("%s %d", r.Name, r.Quantity)
	}
	return strings.Join(parts, ", ")
}

// sortPodsByQOS is the kubelet's: the pods pod may preempt, by QoS class.
func sortPodsByQOS(preemptor *corev1.Pod, pods []*corev1.Pod) (bestEffort, burstable, guaranteed []*corev1.Pod) {
	for _, p := range pods {
		if !Preemptable(preemptor, p) {
			continue
		}
		switch model.GetPodQOS(p) {
		case corev1.PodQOSBestEffort:
			bestEffort = append(bestEffort, p)
		case corev1.PodQOSBurstable:
			burstable = append(burstable, p)
		case corev1.PodQOSGuaranteed:
			guaranteed = append(guaranteed, p)
		}
	}
	return bestEffort, burstable, guaranteed
}

// smallerResourceRequest is the kubelet's: memory first, then cpu.
func smallerResourceRequest(a, b *corev1.Pod) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceCPU} {
		ra, rb := podRequest(a, name), podRequest(b, name)
		if ra != rb {
			return ra < rb
		}
	}
	return true
}
