package admit

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	psapi "k8s.io/pod-security-admission/api"
)

// Admission reasons: the kubelet's for resources and ports, podsync's for
// policy.
const (
	ReasonOutOfPods             = "OutOfpods"
	ReasonOutOfCPU              = "OutOfcpu"
	ReasonOutOfMemory           = "OutOfmemory"
	ReasonOutOfEphemeralStorage = "OutOfephemeral-storage"
	ReasonNodePorts             = "NodePorts"
	ReasonPolicyHostPath        = "PolicyHostPath"
)

// Node is what admission knows of the node.
type Node struct {
	// Allocatable is what pods may request: cpu, memory, pods and
	// optionally ephemeral-storage and extended resources (example.com/foo,
	// podsyncd's --extended-resources). A resource absent here is not
	// limited, except pods, which defaults to DefaultMaxPods, and an
	// extended resource, of which the node then has none.
	Allocatable corev1.ResourceList
	// Capacity is the machine's resources, before the system's
	// reservation; admission does not use it, GetNode reports it.
	Capacity corev1.ResourceList
	// AppArmor says whether the host enforces AppArmor profiles.
	AppArmor bool
	// KernelVersion is the node's kernel release ("6.1.0-18-amd64"): the
	// safe sysctls depend on it. Empty counts as a recent kernel.
	KernelVersion string
	// Name is the node's name, which required node affinity may match
	// with matchFields on metadata.name.
	Name string
	// Labels are the node's labels, which spec.nodeSelector and required
	// node affinity must match (NodeLabels builds them).
	Labels map[string]string
	// Taints are the node's taints; a pod must tolerate each NoExecute
	// and NoSchedule one.
	Taints []corev1.Taint
	// UserNamespaces says whether the runtime runs pods in user
	// namespaces of their own (its handler's user_namespaces feature:
	// containerd 2.x with idmap mounts); a pod with hostUsers false is
	// refused without it.
	UserNamespaces bool
}

// ReasonUserNamespacesUnsupported refuses a pod with hostUsers false on a
// runtime without user namespaces.
const ReasonUserNamespacesUnsupported = "UserNamespacesUnsupported"

// checkUserNamespaces is the kubelet's check that the runtime handler
// supports user namespaces before it runs a pod with hostUsers false.
func checkUserNamespaces(pod *corev1.Pod, node Node) Result {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers || node.UserNamespaces {
		return Result{Admit: true}
	}
	return reject(ReasonUserNamespacesUnsupported, "hostUsers: false asks for a user namespace of the pod's own, and the container runtime "+
		"does not support user namespaces (it needs containerd 2.x with idmap mounts on the node's file systems); "+
		"remove hostUsers (or set it to true) to run the pod with the node's users, or run podsyncd on such a runtime")
}

// IsExtendedResource is the API server's IsExtendedResourceName: a
// domain-qualified name outside kubernetes.io (example.com/foo), not a
// quota's ("requests."). The node declares them with
// --extended-resources.
func IsExtendedResource(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) && !strings.HasPrefix(s, "requests.")
}

// resourceCheck is one resource admission compares with what is
// allocatable, with the kubelet's reason when short.
type resourceCheck struct {
	name   corev1.ResourceName
	reason string
	milli  bool
}

// allocatable is what pods may request of name, and whether it is
// limited: an extended resource the node does not declare has 0, as on
// the kubelet.
func (n Node) allocatable(name corev1.ResourceName) (resource.Quantity, bool) {
	q, ok := n.Allocatable[name]
	if !ok && IsExtendedResource(name) {
		return resource.Quantity{}, true
	}
	return q, ok
}

// DefaultMaxPods is the kubelet's default --max-pods.
const DefaultMaxPods = 110

// Allocatable computes the node's allocatable resources the kubelet's way:
// capacity minus what is reserved for the system, never below zero.
func Allocatable(capacity, reserved corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, c := range capacity {
		a := c.DeepCopy()
		if r, ok := reserved[name]; ok {
			a.Sub(r)
			if a.Sign() < 0 {
				a = *resource.NewQuantity(0, c.Format)
			}
		}
		out[name] = a
	}
	return out
}

// Policy is the node's admission policy: a Pod Security level, checked
// with k8s.io/pod-security-admission, and the operator's exemptions, each
// of which narrows one check to the values it names. The zero value is
// the baseline level without exemptions.
type Policy struct {
	// Level is the Pod Security level: privileged, baseline or restricted
	// ("" is DefaultLevel, baseline).
	Level psapi.Level
	// AllowPrivileged exempts privileged containers from the privileged
	// check.
	AllowPrivileged bool
	// AllowHostNetwork, AllowHostPID and AllowHostIPC exempt pods in the
	// node's namespaces from the hostNamespaces check.
	AllowHostNetwork, AllowHostPID, AllowHostIPC bool
	// AllowedHostPaths are the path prefixes hostPath volumes may use
	// (exempted from the hostPathVolumes and restrictedVolumes checks),
	// each read-only or read-write; a prefix admits itself and everything
	// below it.
	AllowedHostPaths []HostPathPrefix
	// DeniedHostPaths are refused to hostPath volumes at every level,
	// whatever AllowedHostPaths say: a hostPath that is one of them, lies
	// inside one or contains one. podsyncd sets podsync's and the
	// runtime's own paths (DeniedHostPath).
	DeniedHostPaths []DeniedHostPath
	// AllowedHostPorts are the host ports containers may use (exempted
	// from the hostPorts check).
	AllowedHostPorts []PortRange
	// AllowedCapabilities may be added beyond the level's (exempted from
	// the capabilities checks); "ALL" only when listed itself.
	AllowedCapabilities []string
	// AllowedUnsafeSysctls are the sysctls (or prefixes ending in *) pods
	// may set beyond the safe ones, the kubelet's --allowed-unsafe-sysctls.
	AllowedUnsafeSysctls []string
	// PriorityClasses are the priority classes pods may name beyond the
	// built-in system-node-critical and system-cluster-critical, by name
	// (podsyncd's --priority-classes).
	PriorityClasses map[string]int32
}

// Result is an admission decision.
type Result struct {
	// Admit is true when the node takes the pod.
	Admit bool
	// Reason of a rejection, one of the Reason constants.
	Reason string
	// Message for humans.
	Message string
}

func reject(reason, format string, args ...any) Result {
	return Result{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// CheckPolicy checks the pod against the node's policy: its priority
// class (PriorityOf), the paths no
// hostPath may reach, its Pod Security level with the operator's
// exemptions, then, at every level, the kubelet's sysctl allowlist. It runs on every apply of a pod, known or
// new, and on every stored pod when the node starts.
func CheckPolicy(pod *corev1.Pod, node Node, p Policy) Result {
	if _, r := PriorityOf(pod, p.PriorityClasses); !r.Admit {
		return r
	}
	// A denied path first: no exemption or level opens it, and its
	// refusal says why.
	for _, v := range pod.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		if _, err := p.CheckHostPath(v.HostPath.Path); errors.Is(err, ErrHostPathDenied) {
			return reject(ReasonPolicyHostPath, "hostPath volume %q: %v", v.Name, err)
		}
	}
	if r := checkPodSecurity(pod, p); !r.Admit {
		return r
	}
	return checkSysctls(pod, node, p)
}

// Admit decides whether the node takes pod, given the pods it already runs
// or has admitted (others). Terminal pods and earlier instances of the same
// pod (same uid) do not count. The pod alone is checked first (CheckPod),
// then, in the kubelet's order, the pod count, cpu, memory and ephemeral
// storage requests, node selector and required node affinity, host ports,
// and taints.
func Admit(pod *corev1.Pod, others []*corev1.Pod, node Node, p Policy) Result {
	return admitPod(pod, others, node, p, true)
}

// AdmitKnown decides whether the node takes a new spec of a pod it holds
// (an update, or a stored pod when the node starts): every check Admit
// makes of a new pod, the same code in the same order, but the fit of CPU
// and memory, whose change is a resize the node admits when it applies
// it (the kubelet's allocation manager, engine's AdmitResize). An update
// may ask for what a new pod may not — a user namespace on a runtime
// without them, a host port another pod holds — and is refused as a new
// pod would be.
func AdmitKnown(pod *corev1.Pod, others []*corev1.Pod, node Node, p Policy) Result {
	return admitPod(pod, others, node, p, false)
}

// CheckPod is every check of admission that reads the pod and the node
// alone: the policy (CheckPolicy), the pod's operating system (the
// kubelet's predicate handler's first checks), then the runtime's support
// of what the pod asks for, AppArmor (the kubelet's AppArmor handler) and
// user namespaces.
func CheckPod(pod *corev1.Pod, node Node, p Policy) Result {
	if r := CheckPolicy(pod, node, p); !r.Admit {
		return r
	}
	if r := checkPodOS(pod); !r.Admit {
		return r
	}
	if r := checkAppArmor(pod, node); !r.Admit {
		return r
	}
	return checkUserNamespaces(pod, node)
}

// admitPod is Admit, with the fit of CPU and memory (cpuMemory) or
// without (AdmitKnown).
func admitPod(pod *corev1.Pod, others []*corev1.Pod, node Node, p Policy, cpuMemory bool) Result {
	if r := CheckPod(pod, node, p); !r.Admit {
		return r
	}
	var active []*corev1.Pod
	for _, o := range others {
		if o.UID == pod.UID || o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed {
			continue
		}
		active = append(active, o)
	}
	if r := fitsResources(pod, active, node, cpuMemory); !r.Admit {
		return r
	}
	if r := checkNodeAffinity(pod, node); !r.Admit {
		return r
	}
	if r := fitsPorts(pod, active); !r.Admit {
		return r
	}
	return checkTaints(pod, node)
}

// fitsResources checks the pod count and the requests of pod beside the
// active pods; cpuMemory false leaves CPU and memory out.
func fitsResources(pod *corev1.Pod, active []*corev1.Pod, node Node, cpuMemory bool) Result {
	maxPods := int64(DefaultMaxPods)
	if q, ok := node.Allocatable[corev1.ResourcePods]; ok {
		maxPods = q.Value()
	}
	if int64(len(active))+1 > maxPods {
		return reject(ReasonOutOfPods, "Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", len(active), maxPods)
	}
	want := podRequests(pod)
	used := corev1.ResourceList{}
	for _, o := range active {
		addTo(used, podRequests(o))
	}
	var checks []resourceCheck
	if cpuMemory {
		checks = append(checks, resourceCheck{corev1.ResourceCPU, ReasonOutOfCPU, true}, resourceCheck{corev1.ResourceMemory, ReasonOutOfMemory, false})
	}
	checks = append(checks, resourceCheck{corev1.ResourceEphemeralStorage, ReasonOutOfEphemeralStorage, false})
	// Extended resources (example.com/foo) follow, in name order.
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if IsExtendedResource(name) {
			checks = append(checks, resourceCheck{name, "OutOf" + string(name), false})
		}
	}
	for _, check := range checks {
		capacity, limited := node.allocatable(check.name)
		req, requested := want[check.name]
		if !limited || !requested || req.IsZero() {
			continue
		}
		u := used[check.name]
		value := func(q resource.Quantity) int64 {
			if check.milli {
				return q.MilliValue()
			}
			return q.Value()
		}
		if value(req) > value(capacity)-value(u) {
			return reject(check.reason, "Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				check.name, value(req), value(u), value(capacity))
		}
	}
	return Result{Admit: true}
}

// podRequests is the pod's effective request, as the scheduler and the
// kubelet compute it (component-helpers' PodRequests with pod-level
// resources): the sum over regular containers and sidecars, or the largest
// need of any classic init container (plus the sidecars started before
// it), whichever is larger; pod-level requests replace the containers'
// cpu and memory; the pod's overhead is added.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

func addTo(dst, src corev1.ResourceList) {
	for name, q := range src {
		sum := dst[name]
		sum.Add(q)
		dst[name] = sum
	}
}

// hostPort is one host port in use.
type hostPort struct {
	ip       string // "" means every address
	protocol corev1.Protocol
	port     int32
}

func hostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	// The kubelet counts only regular containers' ports (nodeports plugin).
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			ip := p.HostIP
			if a, err := netip.ParseAddr(ip); err == nil && a.IsUnspecified() {
				ip = ""
			}
			out = append(out, hostPort{ip: ip, protocol: proto, port: p.HostPort})
		}
	}
	return out
}

// conflicts is the scheduler's HostPortInfo.CheckConflict: the same port
// and protocol on the same address, or on all addresses.
func (a hostPort) conflicts(b hostPort) bool {
	return a.port == b.port && a.protocol == b.protocol && (a.ip == "" || b.ip == "" || a.ip == b.ip)
}

func fitsPorts(pod *corev1.Pod, active []*corev1.Pod) Result {
	want := hostPorts(pod)
	if len(want) == 0 {
		return Result{Admit: true}
	}
	for _, o := range active {
		for _, used := range hostPorts(o) {
			for _, w := range want {
				if w.conflicts(used) {
					return reject(ReasonNodePorts, "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports (%s %d/%s is used by pod %s/%s)",
						displayIP(w.ip), w.port, w.protocol, o.Namespace, o.Name)
				}
			}
		}
	}
	return Result{Admit: true}
}

func displayIP(ip string) string {
	if ip == "" {
		return "0.0.0.0"
	}
	return ip
}

// Batch admits pods in order with Admit, each against others and the pods
// admitted before it in the batch. With allOrNothing, a single rejection
// rejects every pod of the batch; the pods that would have been admitted
// get reason NotRunAllOrNothing (Sequence). The node admits a RunPods
// batch with Sequence and its own admission function, which reserves
// each pod it admits.
func Batch(pods, others []*corev1.Pod, node Node, p Policy, allOrNothing bool) []Result {
	admitted := append([]*corev1.Pod(nil), others...)
	return Sequence(pods, allOrNothing, func(_ int, pod *corev1.Pod) Result {
		r := Admit(pod, admitted, node, p)
		if r.Admit {
			admitted = append(admitted, pod)
		}
		return r
	})
}

// Sequence decides a batch of pods in order, the i-th by decide (which
// counts the pods admitted before it); with allOrNothing, one refusal
// refuses every pod admitted (ReasonNotRunAllOrNothing).
func Sequence(pods []*corev1.Pod, allOrNothing bool, decide func(i int, pod *corev1.Pod) Result) []Result {
	results := make([]Result, len(pods))
	rejected := false
	for i, pod := range pods {
		results[i] = decide(i, pod)
		rejected = rejected || !results[i].Admit
	}
	if allOrNothing && rejected {
		for i := range results {
			if results[i].Admit {
				results[i] = reject(ReasonNotRunAllOrNothing, "not run: another pod of the batch was rejected and admission is ALL_OR_NOTHING")
			}
		}
	}
	return results
}

// ReasonNotRunAllOrNothing marks a pod that would have been admitted but
// was not run because another pod of an ALL_OR_NOTHING batch was rejected.
const ReasonNotRunAllOrNothing = "NotRunAllOrNothing"
