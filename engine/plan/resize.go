package plan

import (
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsync/podsync/engine/model"
)

// ReasonResizeRestart is the reason of a kill and start that apply a
// resize whose resizePolicy is RestartContainer.
const ReasonResizeRestart = "ResizeRequiresRestart"

// The kubelet's floors (pkg/kubelet/cm helpers_linux.go): CPU requests at
// or below MinShares millicores all map to the minimum cpu.shares, and CPU
// limits at or below MinMilliCPULimit to the minimum CFS quota, so values
// at or below them are equal.
const (
	minShares        = 2
	minMilliCPULimit = 10
	sharesPerCPU     = 1024
	milliCPUToCPU    = 1000
)

// ContainerResources are the CPU and memory values an in-place resize
// changes: the kubelet's resourceRequirements (kuberuntime_manager.go).
// CPU is in millicores, memory in bytes; 0 is unset.
type ContainerResources struct {
	CPURequest    int64 `json:",omitempty"`
	CPULimit      int64 `json:",omitempty"`
	MemoryRequest int64 `json:",omitempty"`
	MemoryLimit   int64 `json:",omitempty"`
}

// ResourcesFromRequirements is the kubelet's
// containerResourcesFromRequirements (without pod-level resources), with
// an unset request defaulting to the limit as the API server defaults it
// (and as the runtime config is built from it).
func ResourcesFromRequirements(r *corev1.ResourceRequirements) ContainerResources {
	out := ContainerResources{
		CPURequest:    r.Requests.Cpu().MilliValue(),
		CPULimit:      r.Limits.Cpu().MilliValue(),
		MemoryRequest: r.Requests.Memory().Value(),
		MemoryLimit:   r.Limits.Memory().Value(),
	}
	if _, ok := r.Requests[corev1.ResourceCPU]; !ok {
		out.CPURequest = out.CPULimit
	}
	if _, ok := r.Requests[corev1.ResourceMemory]; !ok {
		out.MemoryRequest = out.MemoryLimit
	}
	return out
}

// Requirements returns r as resource requirements: CPU and memory
// requests and limits, unset values left out.
func (r ContainerResources) Requirements() corev1.ResourceRequirements {
	return r.Apply(corev1.ResourceRequirements{})
}

// Apply returns a copy of req with its CPU and memory requests and limits
// set to r (0 unsets a value); other resources are kept.
func (r ContainerResources) Apply(req corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *req.DeepCopy()
	set := func(l *corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity, v int64) {
		if v == 0 {
			delete(*l, name)
			return
		}
		if *l == nil {
			*l = corev1.ResourceList{}
		}
		(*l)[name] = *q
	}
	set(&out.Requests, corev1.ResourceCPU, resource.NewMilliQuantity(r.CPURequest, resource.DecimalSI), r.CPURequest)
	set(&out.Limits, corev1.ResourceCPU, resource.NewMilliQuantity(r.CPULimit, resource.DecimalSI), r.CPULimit)
	set(&out.Requests, corev1.ResourceMemory, resource.NewQuantity(r.MemoryRequest, resource.BinarySI), r.MemoryRequest)
	set(&out.Limits, corev1.ResourceMemory, resource.NewQuantity(r.MemoryLimit, resource.BinarySI), r.MemoryLimit)
	return out
}

// ResizeAction is an in-place resize of one running container: CRI
// UpdateContainerResources from Current to Desired, for the resources
// whose value differs.
type ResizeAction struct {
	Name        string
	ContainerID string
	Current     ContainerResources
	Desired     ContainerResources
}

// Memory reports whether the resize changes the memory limit, the memory
// value CRI applies (a memory request reaches no cgroup).
func (r ResizeAction) Memory() bool { return r.Current.MemoryLimit != r.Desired.MemoryLimit }

// CPU reports whether the resize changes the CPU request or limit.
func (r ResizeAction) CPU() bool {
	return !cpuLimitEqual(r.Current.CPULimit, r.Desired.CPULimit) || !cpuRequestEqual(r.Current.CPURequest, r.Desired.CPURequest)
}

// ResizeOrder returns the resizes of rs that change resource (cpu or
// memory) in the order the kubelet applies them: decreases first, then
// increases, each in spec order (computePodResizeAction prepends a
// decrease and appends an increase, comparing the limit, or the request
// when the limit is unchanged).
func ResizeOrder(rs []ResizeAction, resource corev1.ResourceName) []ResizeAction {
	var down, up []ResizeAction
	for _, r := range rs {
		var cur, want int64
		switch {
		case resource == corev1.ResourceMemory && r.Memory():
			cur, want = r.Current.MemoryLimit, r.Desired.MemoryLimit
		case resource == corev1.ResourceCPU && !cpuLimitEqual(r.Current.CPULimit, r.Desired.CPULimit):
			cur, want = r.Current.CPULimit, r.Desired.CPULimit
		case resource == corev1.ResourceCPU && !cpuRequestEqual(r.Current.CPURequest, r.Desired.CPURequest):
			cur, want = r.Current.CPURequest, r.Desired.CPURequest
		default:
			continue
		}
		if want < cur {
			down = append(down, r)
		} else {
			up = append(up, r)
		}
	}
	// Prepending reverses the decreases, as in the kubelet.
	slices.Reverse(down)
	return append(down, up...)
}

func cpuRequestEqual(a, b int64) bool { return a == b || (a <= minShares && b <= minShares) }
func cpuLimitEqual(a, b int64) bool {
	return a == b || (a <= minMilliCPULimit && b <= minMilliCPULimit)
}

// sharesToMilliCPU and quotaToMilliCPU are the kubelet's
// (kuberuntime_container_linux.go), turning what the runtime reports back
// into millicores.
func sharesToMilliCPU(shares int64) int64 {
	if shares < minShares {
		return 0
	}
	return int64(math.Ceil(float64(shares*milliCPUToCPU) / float64(sharesPerCPU)))
}

func quotaToMilliCPU(quota, period int64) int64 {
	if quota <= 0 || period <= 0 {
		return 0
	}
	return quota * milliCPUToCPU / period
}

// ActualResources returns the resources a running instance runs with: what
// the runtime reports where it reports a value (CPU request from the
// shares, CPU limit from the quota, memory limit), else what the instance
// was created with; ok is false if neither is known (the spec annotation
// is lost).
func ActualResources(inst *model.ContainerInstance) (ContainerResources, bool) {
	if inst.Spec == nil {
		return ContainerResources{}, false
	}
	out := ResourcesFromRequirements(&inst.Spec.Resources)
	if rr := inst.Resources; rr != nil {
		if rr.CPUShares != 0 {
			out.CPURequest = sharesToMilliCPU(rr.CPUShares)
		}
		if rr.CPUQuota > 0 {
			out.CPULimit = quotaToMilliCPU(rr.CPUQuota, rr.CPUPeriod)
		}
		if rr.MemoryLimitInBytes > 0 {
			out.MemoryLimit = rr.MemoryLimitInBytes
		}
	}
	return out, true
}

// comparableResources is ActualResources(inst) to compare with desired:
// where the runtime applies no CFS quota (podsyncd runs with the quota
// disabled, or the container has no CPU limit, which a resize cannot
// add), there is no CPU limit to change, so desired's is taken.
func comparableResources(inst *model.ContainerInstance, desired ContainerResources) (ContainerResources, bool) {
	current, ok := ActualResources(inst)
	if rr := inst.Resources; ok && rr != nil && rr.CPUQuota <= 0 {
		current.CPULimit = desired.CPULimit
	}
	return current, ok
}

// startResized lists the containers a starts with other CPU or memory
// than their newest instance ran with (PodActions.StartResized): the
// kubelet's UpdatePodResources, set by computePodResizeAction for a
// container a resize restarts and by startingResizedContainer for any
// regular container it starts. A container that never ran is left out:
// the sandbox was created with its resources. NOTE(podsync): the kubelet
// decides before its back-off checks and updates the pod level even for
// a container that then waits; podsync lists the containers that start
// in this pass, so a crash loop does not update the pod level at every
// pass (podsync has no pod cgroup to read the last update back from).
func (p *planner) startResized(a *PodActions) []ResizeAction {
	if a.KillPod || a.Sandbox.Create {
		return nil
	}
	var out []ResizeAction
	add := func(s ContainerAction) {
		c := model.SpecContainer(p.pod, s.Name)
		inst := p.view.FindContainer(s.Name)
		if c == nil || inst == nil {
			return
		}
		desired := ResourcesFromRequirements(&c.Resources)
		current, ok := comparableResources(inst, desired)
		if !ok || sameResources(current, desired) {
			return
		}
		out = append(out, ResizeAction{Name: c.Name, ContainerID: inst.ID, Current: current, Desired: desired})
	}
	for _, s := range a.StartInit {
		if s.Reason == ReasonResizeRestart {
			add(s)
		}
	}
	for _, s := range a.Start {
		add(s)
	}
	return out
}

// resizeKind is what computeResize decided.
type resizeKind int

const (
	// resizeNotPossible: the change is not one a resize applies (another
	// field or resource changed, a limit is added or removed, the QoS
	// class would change, the spec annotation is lost); the container is
	// restarted as for any definition change.
	resizeNotPossible resizeKind = iota
	// resizeDone: the running container already has the resources.
	resizeDone
	// resizeInPlace: UpdateContainerResources.
	resizeInPlace
	// resizeRestart: a changed resource's resizePolicy is RestartContainer.
	resizeRestart
)

// computeResize is the kubelet's computePodResizeAction for a running
// container whose spec hash differs from its instance's.
func (p *planner) computeResize(c *corev1.Container, inst *model.ContainerInstance) (resizeKind, ResizeAction) {
	if inst.State != model.ContainerRunning || !p.resourcesOnly(c, inst) {
		return resizeNotPossible, ResizeAction{}
	}
	desired := ResourcesFromRequirements(&c.Resources)
	current, _ := comparableResources(inst, desired)
	created := ResourcesFromRequirements(&inst.Spec.Resources)
	r := ResizeAction{Name: c.Name, ContainerID: inst.ID, Current: current, Desired: desired}
	policy := func(name corev1.ResourceName) corev1.ResourceResizeRestartPolicy {
		for _, rp := range c.ResizePolicy {
			if rp.ResourceName == name {
				return rp.RestartPolicy
			}
		}
		return corev1.NotRequired
	}
	memChanged := r.Memory() || created.MemoryRequest != desired.MemoryRequest
	if (memChanged && policy(corev1.ResourceMemory) == corev1.RestartContainer) ||
		(r.CPU() && policy(corev1.ResourceCPU) == corev1.RestartContainer) {
		return resizeRestart, r
	}
	if !r.Memory() && !r.CPU() {
		// Nothing the runtime applies differs (a memory request reaches
		// no cgroup, values below the floors are equal).
		return resizeDone, r
	}
	return resizeInPlace, r
}

// resourcesOnly reports whether c differs from what inst was created
// with in CPU and memory values only, in a way a resize can change
// (resizableChange), keeping the pod's QoS class.
func (p *planner) resourcesOnly(c *corev1.Container, inst *model.ContainerInstance) bool {
	if inst.Spec == nil {
		return false
	}
	changed := model.ChangedFields(inst.Spec, model.NewContainerSpec(p.pod, c))
	if len(changed) != 1 || changed[0] != "resources" || !resizableChange(&inst.Spec.Resources, &c.Resources) {
		return false
	}
	return model.ComputePodQOS(p.pod) == model.ComputePodQOS(p.actualPod())
}

// resizableChange reports whether old and new differ only in CPU and
// memory values that a resize can change: no other resource and no limit
// removed (the API server's validation forbids removing one, and CRI
// cannot unset one). A limit added is a resize, as on a kubelet since
// v1.34: it is a change from no limit (0) to one.
func resizableChange(old, new *corev1.ResourceRequirements) bool {
	other := func(l corev1.ResourceList) corev1.ResourceList {
		out := corev1.ResourceList{}
		for k, v := range l {
			if k != corev1.ResourceCPU && k != corev1.ResourceMemory {
				out[k] = v
			}
		}
		return out
	}
	if !equality.Semantic.DeepEqual(other(old.Requests), other(new.Requests)) ||
		!equality.Semantic.DeepEqual(other(old.Limits), other(new.Limits)) ||
		!equality.Semantic.DeepEqual(old.Claims, new.Claims) {
		return false
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		_, had := old.Limits[name]
		_, has := new.Limits[name]
		if had && !has {
			return false
		}
	}
	return true
}

// actualPod is the pod with each container's resources as its newest
// instance was created with, for the QoS class the pod runs in.
func (p *planner) actualPod() *corev1.Pod {
	pod := p.pod.DeepCopy()
	pod.Status.QOSClass = ""
	set := func(cs []corev1.Container) {
		for i := range cs {
			if inst := p.view.FindContainer(cs[i].Name); inst != nil && inst.Spec != nil {
				cs[i].Resources = inst.Spec.Resources
			}
		}
	}
	set(pod.Spec.InitContainers)
	set(pod.Spec.Containers)
	return pod
}

// resizeRestartMessage is the kubelet's.
func resizeRestartMessage(name string) string {
	return fmt.Sprintf("Container %s resize requires restart", name)
}

// ResizePending is a resize the node has not admitted: the kubelet's
// PodResizePending condition. Reason is Deferred (the pod's new requests
// do not fit the node now) or Infeasible.
type ResizePending struct {
	Reason  string
	Message string
}

// ResizeRequested reports whether pod asks a container for CPU or memory
// other than the node allocated it (what its newest instance runs, or ran,
// with): a resize the node admits (the kubelet's allocation manager)
// before it is applied. A memory request counts, though no cgroup applies
// it: admission counts requests.
func ResizeRequested(pod *corev1.Pod, view *model.RuntimeView) bool {
	p := &planner{pod: pod, view: view}
	for c, inst := range p.changed() {
		if alloc, ok := p.allocatedResources(c, inst); ok &&
			!sameResources(ResourcesFromRequirements(&alloc), ResourcesFromRequirements(&c.Resources)) {
			return true
		}
	}
	return false
}

// ResizeInProgress reports whether a running container's CPU or memory
// limit or CPU request still differs from an admitted resize: the
// kubelet's PodResizeInProgress condition, until the runtime runs what
// was allocated.
func ResizeInProgress(pod *corev1.Pod, view *model.RuntimeView) bool {
	p := &planner{pod: pod, view: view}
	for c, inst := range p.changed() {
		if kind, _ := p.computeResize(c, inst); kind == resizeInPlace || kind == resizeRestart {
			return true
		}
	}
	return false
}

// AllocatedPod returns pod with each container whose change is a resize
// given the CPU and memory the node allocated it (ResizeRequested): the
// pod as the kubelet's UpdatePodFromAllocation gives it to SyncPod while
// a resize waits for admission, so a pass resizes nothing and a container
// that restarts meanwhile gets what it had.
func AllocatedPod(pod *corev1.Pod, view *model.RuntimeView) *corev1.Pod {
	p := &planner{pod: pod, view: view}
	out := pod.DeepCopy()
	for c, inst := range p.changed() {
		if alloc, ok := p.allocatedResources(c, inst); ok {
			model.SpecContainer(out, c.Name).Resources = alloc
		}
	}
	return out
}

// allocatedResources returns what the node allocated c when its change
// from inst is one of CPU and memory only: a running instance's actual
// values (its memory request as created, which no cgroup shows), an
// exited one's as it was created.
func (p *planner) allocatedResources(c *corev1.Container, inst *model.ContainerInstance) (corev1.ResourceRequirements, bool) {
	if !p.resourcesOnly(c, inst) {
		return corev1.ResourceRequirements{}, false
	}
	if inst.State != model.ContainerRunning {
		return *inst.Spec.Resources.DeepCopy(), true
	}
	cur, _ := ActualResources(inst)
	cur.MemoryRequest = ResourcesFromRequirements(&inst.Spec.Resources).MemoryRequest
	return cur.Apply(c.Resources), true
}

// sameResources compares CPU and memory values, with the kubelet's CPU
// floors.
func sameResources(a, b ContainerResources) bool {
	return cpuRequestEqual(a.CPURequest, b.CPURequest) && cpuLimitEqual(a.CPULimit, b.CPULimit) &&
		a.MemoryRequest == b.MemoryRequest && a.MemoryLimit == b.MemoryLimit
}

// changed yields the regular containers and sidecars whose newest
// instance's spec hash differs from the spec's.
func (p *planner) changed() func(yield func(*corev1.Container, *model.ContainerInstance) bool) {
	return func(yield func(*corev1.Container, *model.ContainerInstance) bool) {
		visit := func(cs []corev1.Container, sidecarsOnly bool) bool {
			for i := range cs {
				c := &cs[i]
				if sidecarsOnly && !model.IsRestartableInitContainer(c) {
					continue
				}
				inst := p.view.FindContainer(c.Name)
				if inst == nil || inst.Hash == model.ContainerHash(p.pod, c) {
					continue
				}
				if !yield(c, inst) {
					return false
				}
			}
			return true
		}
		if visit(p.pod.Spec.InitContainers, true) {
			visit(p.pod.Spec.Containers, false)
		}
	}
}
