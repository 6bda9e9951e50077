package plan

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/model"
)

// Reasons for a SandboxDecision.
const (
	SandboxReasonNone            = "NoSandbox"
	SandboxReasonMultipleReady   = "MultipleReadySandboxes"
	SandboxReasonNotReady        = "SandboxNotReady"
	SandboxReasonNetworkChanged  = "NetworkNamespaceChanged"
	SandboxReasonNoIP            = "SandboxWithoutIP"
	SandboxReasonReady           = "SandboxReady"
	SandboxReasonNotRecreated    = "SandboxNotRecreated"
	SandboxReasonPodNotRunnable  = "PodNotRunnable"
	SandboxReasonInitializedDone = "PodCompleted"
)

// Reasons for killing the whole pod (PodActions.KillPodReason).
const (
	KillReasonSandboxChanged      = "SandboxChanged"
	KillReasonInitContainerFailed = "InitContainerFailed"
	KillReasonAllContainersDone   = "AllContainersDone"
	KillReasonPodDeleted          = "PodDeleted"
	KillReasonPodTerminal         = "PodTerminal"
	KillReasonDeadlineExceeded    = "DeadlineExceeded"
	// KillReasonBackoffLimitExceeded: the pod's containers failed more
	// often than its backoff limit allows (BackoffLimitExceeded).
	KillReasonBackoffLimitExceeded = "BackoffLimitExceeded"
)

// Reasons for a ContainerAction.
const (
	ReasonNotStarted        = "NotStarted"
	ReasonExited            = "Exited"
	ReasonCreated           = "Created"
	ReasonUnknownState      = "Unknown"
	ReasonDefinitionChanged = "DefinitionChanged"
	ReasonLivenessProbe     = "LivenessProbeFailed"
	ReasonStartupProbe      = "StartupProbeFailed"
	ReasonNewSandbox        = "NewSandbox"
	ReasonNextInitContainer = "NextInitContainer"
	ReasonInitFailed        = "InitContainerFailed"
	ReasonSidecarExited     = "SidecarExited"
	ReasonSidecarMissing    = "SidecarMissing"
	ReasonPodKilled         = "PodKilled"
	ReasonNotInSpec         = "NotInSpec"
	ReasonCrashLoopBackOff  = "CrashLoopBackOff"
	ReasonImagePullBackOff  = "ImagePullBackOff"
	// ReasonInitContainerPruned is the reason of a PruneInit removal.
	ReasonInitContainerPruned = "InitContainerPruned"
	// ReasonOOMKilled is the runtime's reason for a container the kernel
	// killed for memory.
	ReasonOOMKilled = "OOMKilled"
)

// SandboxDecision says what to do with the pod's sandbox.
type SandboxDecision struct {
	// Create is set when a new sandbox must be created, with Attempt.
	Create  bool
	Attempt uint32
	// ID is the sandbox the containers run in when none is created.
	ID string
	// PreviousID is, when one is created, the sandbox it replaces as the
	// kubelet's PodSandboxChanged carries it: the newest sandbox, except
	// when there is none or its network namespace mode changed. The
	// kubelet's SandboxChanged event is recorded only when it is set.
	PreviousID string `json:",omitempty"`
	// KillIDs are the ready sandboxes to stop (when the pod is killed).
	KillIDs []string
	Reason  string
	Message string
}

// ContainerAction is one decision about one container, named as in the
// spec.
type ContainerAction struct {
	Name string
	// ContainerID is the instance to kill (kills only).
	ContainerID string `json:",omitempty"`
	// Attempt is the restart count of the instance to create (starts and
	// back-offs only): the newest instance's plus one, or 0.
	Attempt uint32 `json:",omitempty"`
	Reason  string
	Message string
	// ChangedFields names what changed, for ReasonDefinitionChanged.
	ChangedFields []string `json:",omitempty"`
	// NextAttempt is when a backed-off start may happen.
	NextAttempt time.Time `json:",omitzero"`
}

// PodActions is the plan for one pod, the kubelet's podActions with
// containers named and a reason for every decision. The executor runs it
// in kubelet order: kill the pod (or the containers in Kill), create the
// sandbox, start StartInit in order, then Start.
type PodActions struct {
	// KillPod stops every running container and every ready sandbox.
	KillPod        bool
	KillPodReason  string `json:",omitempty"`
	KillPodMessage string `json:",omitempty"`
	Sandbox        SandboxDecision
	// Kill lists the containers to stop: with KillPod, every running
	// container (regular ones first, then init containers in reverse
	// order); otherwise those not to keep.
	Kill []ContainerAction
	// StartInit lists the init containers to start, in spec order.
	StartInit []ContainerAction
	// Start lists the regular containers to start, in spec order.
	Start []ContainerAction
	// StartEphemeral lists the ephemeral containers to start, in spec
	// order: those the runtime holds no instance of (the kubelet's
	// EphemeralContainersToStart). They start before the init containers,
	// even while initialization runs, and are never restarted.
	StartEphemeral []ContainerAction `json:",omitempty"`
	// BackOff lists the containers due to start that must wait (reason
	// CrashLoopBackOff or ImagePullBackOff, with NextAttempt).
	BackOff []ContainerAction
	// PruneInit lists the dead init container instances to remove after
	// the kills and before the sandbox is created and containers start
	// (the kubelet's pruneInitContainersBeforeStart), with ContainerID and
	// Attempt (their restart count). It is empty when a new sandbox is
	// created: every init container instance is removed then.
	PruneInit []ContainerAction `json:",omitempty"`
	// Resize lists the running containers whose CPU or memory is changed
	// in place (CRI UpdateContainerResources): sidecars (the last
	// first), then regular containers in spec order; the kubelet's ContainersToUpdate. The executor applies them
	// after the kills and before any start, memory first, each resource's
	// decreases before its increases (ResizeOrder).
	Resize []ResizeAction `json:",omitempty"`
	// StartResized lists the containers of Start, and the sidecars of
	// StartInit that a resize restarts, which start with other CPU or
	// memory than their newest instance ran with (ContainerID, Current):
	// a resize under resizePolicy RestartContainer, or a container
	// restarted after its resources changed. The pod's aggregate
	// resources change with them; the executor tells the runtime
	// (UpdatePodSandboxResources) after the kills and before the starts,
	// with the in-place resizes: the kubelet's UpdatePodResources.
	StartResized []ResizeAction `json:",omitempty"`
	// ResizePending is set, by the executor, when the pod asks for a
	// resize the node has not admitted: the plan is then the allocated
	// pod's (AllocatedPod), which does not resize.
	ResizePending *ResizePending `json:",omitempty"`
}

// shouldRestartOnFailure is the kubelet's: restartPolicy is not Never.
func shouldRestartOnFailure(pod *corev1.Pod) bool {
	return pod.Spec.RestartPolicy != corev1.RestartPolicyNever
}

// ComputePodActions plans one sync of pod against what the runtime holds,
// as the kubelet's computePodActions (with computeInitContainerActions)
// followed by the back-off checks of its SyncPod. It is pure.
//
// Beyond the kubelet's rules it handles what the kubelet's pod workers
// handle before SyncPod: a pod being deleted, in a terminal phase or past
// its activeDeadlineSeconds is killed and nothing restarts; and, as podsync
// specs are mutable, running containers no longer in the spec are killed.
func ComputePodActions(pod *corev1.Pod, view model.RuntimeView, probes model.ProbeResults, now time.Time, bo BackoffPolicy) PodActions {
	p := planner{pod: pod, view: &view, probes: probes}
	if reason, msg := PodNotRunnable(pod, &view, now); reason != "" {
		sb := PodSandboxChanged(pod, &view)
		a := PodActions{Sandbox: SandboxDecision{Reason: SandboxReasonPodNotRunnable, Message: msg}}
		if !sb.Create {
			a.Sandbox.ID = sb.ID
		}
		p.killPod(&a, reason, msg)
		return a
	}
	a := p.compute()
	p.finish(&a, now, bo)
	a.StartResized = p.startResized(&a)
	if !a.Sandbox.Create {
		a.PruneInit = p.pruneInitContainers(bo)
	}
	return a
}

type planner struct {
	pod    *corev1.Pod
	view   *model.RuntimeView
	probes model.ProbeResults
	// kills and starts keyed by container name, for dedup.
	kills map[string]ContainerAction
}

func (p *planner) kill(c *corev1.Container, inst *model.ContainerInstance, reason, msg string, changed []string) {
	if p.kills == nil {
		p.kills = map[string]ContainerAction{}
	}
	p.kills[c.Name] = ContainerAction{Name: c.Name, ContainerID: inst.ID, Reason: reason, Message: msg, ChangedFields: changed}
}

func (p *planner) startAction(c *corev1.Container, reason, msg string) ContainerAction {
	var attempt uint32
	if inst := p.view.FindContainer(c.Name); inst != nil {
		attempt = uint32(inst.RestartCount) + 1
	}
	return ContainerAction{Name: c.Name, Attempt: attempt, Reason: reason, Message: msg}
}

// killPod sets a whole-pod kill: every running instance, every ready
// sandbox.
func (p *planner) killPod(a *PodActions, reason, msg string) {
	a.KillPod = true
	a.KillPodReason = reason
	a.KillPodMessage = msg
	a.Kill = nil
	a.StartInit = nil
	a.StartEphemeral = nil
	a.Resize = nil
	a.StartResized = nil
	for _, s := range p.view.Sandboxes {
		if s.State == model.SandboxReady {
			a.Sandbox.KillIDs = append(a.Sandbox.KillIDs, s.ID)
		}
	}
	// Regular containers first, then init containers in reverse, as the
	// kubelet's termination ordering stops sidecars last.
	order := make([]string, 0, len(p.pod.Spec.Containers)+len(p.pod.Spec.InitContainers))
	for _, c := range p.pod.Spec.Containers {
		order = append(order, c.Name)
	}
	for i := len(p.pod.Spec.InitContainers) - 1; i >= 0; i-- {
		order = append(order, p.pod.Spec.InitContainers[i].Name)
	}
	rank := func(name string) int {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
		return len(order)
	}
	var running []model.ContainerInstance
	for _, inst := range p.view.Containers {
		if inst.State == model.ContainerRunning {
			running = append(running, inst)
		}
	}
	slices.SortStableFunc(running, func(x, y model.ContainerInstance) int { return rank(x.Name) - rank(y.Name) })
	for _, inst := range running {
		a.Kill = append(a.Kill, ContainerAction{Name: inst.Name, ContainerID: inst.ID, Reason: ReasonPodKilled, Message: msg})
	}
}

func (p *planner) compute() PodActions {
	pod := p.pod
	sb := PodSandboxChanged(pod, p.view)
	a := PodActions{Sandbox: sb}
	if sb.Create {
		return p.computeNewSandbox(a)
	}

	// Ephemeral containers may be started even if initialization is not
	// yet complete; they are never restarted: one the runtime holds an
	// instance of (running or exited) is left alone.
	for i := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		if p.view.FindContainer(c.Name) == nil {
			a.StartEphemeral = append(a.StartEphemeral, p.startAction(c, ReasonNotStarted, "Ephemeral container is not started"))
		}
	}

	initialized := p.computeInitContainerActions(&a)
	if a.KillPod {
		return a
	}
	if !initialized {
		p.collectKills(&a)
		return a
	}

	keep := 0
	restart := shouldRestartOnFailure(pod)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		inst := p.view.FindContainer(c.Name)
		if inst == nil || inst.State != model.ContainerRunning {
			if reason, ok := ShouldContainerBeRestarted(c, pod, p.view); ok {
				a.Start = append(a.Start, p.startAction(c, reason, "Container is not in the desired state and shall be started"))
				if inst != nil && inst.State == model.ContainerUnknown {
					p.kill(c, inst, ReasonUnknownState,
						fmt.Sprintf("Container is in %q state, try killing it before restart", inst.State), nil)
				}
			}
			continue
		}
		var reason, msg string
		var changed []string
		willRestart := restart
		if c.RestartPolicy != nil {
			// A probe's failure: the container's own restart policy, not
			// its rules, as it has not exited (the kubelet's).
			willRestart = *c.RestartPolicy != corev1.ContainerRestartPolicyNever
		}
		resize, r := resizeDone, ResizeAction{}
		if hash := model.ContainerHash(pod, c); hash != inst.Hash {
			// The kubelet's container hash leaves resources out: a
			// change of CPU and memory only is a resize.
			resize, r = p.computeResize(c, inst)
		}
		if resize == resizeNotPossible {
			changed = model.ChangedFields(inst.Spec, model.NewContainerSpec(pod, c))
			reason, msg = ReasonDefinitionChanged, fmt.Sprintf("Container %s definition changed", c.Name)
			willRestart = true
		} else if p.probes.Liveness[inst.ID] == model.ProbeFailure {
			reason, msg = ReasonLivenessProbe, fmt.Sprintf("Container %s failed liveness probe", c.Name)
		} else if p.probes.Startup[inst.ID] == model.ProbeFailure {
			reason, msg = ReasonStartupProbe, fmt.Sprintf("Container %s failed startup probe", c.Name)
		} else if resize == resizeRestart {
			reason, msg = ReasonResizeRestart, resizeRestartMessage(c.Name)
			willRestart = true
		} else {
			if resize == resizeInPlace {
				a.Resize = append(a.Resize, r)
			}
			keep++
			continue
		}
		if willRestart {
			if reason != ReasonResizeRestart {
				msg += ", will be restarted"
			}
			a.Start = append(a.Start, p.startAction(c, reason, msg))
		}
		p.kill(c, inst, reason, msg, changed)
	}
	p.killNotInSpec()
	if keep == 0 && len(a.Start) == 0 {
		// Nothing to keep or start: stop the pod, sidecars included.
		p.killPod(&a, KillReasonAllContainersDone, "Stopping pod because all other containers are dead")
		return a
	}
	p.collectKills(&a)
	return a
}

// computeNewSandbox is computePodActions' branch for a pod that needs a new
// sandbox: everything is killed, and init containers start from the first.
func (p *planner) computeNewSandbox(a PodActions) PodActions {
	pod := p.pod
	attempt := a.Sandbox.Attempt
	p.killPod(&a, KillReasonSandboxChanged, a.Sandbox.Message)
	a.Sandbox.Create = true
	a.Sandbox.Attempt = attempt
	if !shouldRestartOnFailure(pod) && attempt != 0 && len(p.view.Containers) != 0 {
		// restartPolicy Never: a dead sandbox is not recreated once
		// containers have run.
		a.Sandbox.Create = false
		a.Sandbox.Reason = SandboxReasonNotRecreated
		a.Sandbox.Message = "Pod with restartPolicy Never has run; its sandbox is not recreated"
		return a
	}
	var starts []ContainerAction
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		// Containers that run once (OnFailure, the container's own policy
		// first) and succeeded are not started again.
		runOnce := pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure
		if c.RestartPolicy != nil {
			runOnce = *c.RestartPolicy == corev1.ContainerRestartPolicyOnFailure
		}
		if runOnce && containerSucceeded(c, p.view) {
			continue
		}
		starts = append(starts, p.startAction(c, ReasonNewSandbox, "Container will be started in a new sandbox"))
	}
	if len(starts) == 0 && hasAnyRegularContainerCreated(pod, p.view) {
		a.Sandbox.Create = false
		a.Sandbox.Reason = SandboxReasonInitializedDone
		a.Sandbox.Message = "Pod has completed; its sandbox is not recreated"
		return a
	}
	if len(pod.Spec.InitContainers) != 0 {
		a.StartInit = []ContainerAction{p.startAction(&pod.Spec.InitContainers[0], ReasonNewSandbox,
			"Init containers start from the first in a new sandbox")}
		return a
	}
	a.Start = starts
	return a
}

// containerSucceeded is the kubelet's: the newest instance exited 0.
func containerSucceeded(c *corev1.Container, view *model.RuntimeView) bool {
	inst := view.FindContainer(c.Name)
	return inst != nil && inst.State == model.ContainerExited && inst.ExitCode == 0
}

// hasAnyRegularContainerCreated is the kubelet's.
func hasAnyRegularContainerCreated(pod *corev1.Pod, view *model.RuntimeView) bool {
	for i := range pod.Spec.Containers {
		inst := view.FindContainer(pod.Spec.Containers[i].Name)
		if inst == nil {
			continue
		}
		switch inst.State {
		case model.ContainerCreated, model.ContainerRunning, model.ContainerExited:
			return true
		}
	}
	return false
}

// ShouldContainerBeRestarted is the kubelet's ShouldContainerBeRestarted,
// returning the reason.
func ShouldContainerBeRestarted(c *corev1.Container, pod *corev1.Pod, view *model.RuntimeView) (string, bool) {
	if pod.DeletionTimestamp != nil {
		return "", false
	}
	inst := view.FindContainer(c.Name)
	if inst == nil {
		return ReasonNotStarted, true
	}
	switch inst.State {
	case model.ContainerRunning:
		return "", false
	case model.ContainerUnknown:
		return ReasonUnknownState, true
	case model.ContainerCreated:
		return ReasonCreated, true
	}
	// The container's restart rules and policy, then the pod's
	// (ContainerRestartRules).
	if !model.ContainerShouldRestart(&pod.Spec, c, inst.ExitCode) {
		return "", false
	}
	return ReasonExited, true
}

// killNotInSpec kills running instances of containers the spec no longer
// names (podsync specs are mutable; the kubelet's are not).
func (p *planner) killNotInSpec() {
	for i := range p.view.Containers {
		inst := &p.view.Containers[i]
		if inst.State != model.ContainerRunning || model.SpecContainer(p.pod, inst.Name) != nil {
			continue
		}
		if _, dup := p.kills[inst.Name]; dup {
			continue
		}
		if p.kills == nil {
			p.kills = map[string]ContainerAction{}
		}
		p.kills[inst.Name] = ContainerAction{Name: inst.Name, ContainerID: inst.ID, Reason: ReasonNotInSpec,
			Message: fmt.Sprintf("Container %s is no longer in the pod spec", inst.Name)}
	}
}

// collectKills moves the kill decisions into a, init containers first,
// then regular containers, each in spec order, then others by name.
func (p *planner) collectKills(a *PodActions) {
	var order []string
	for _, c := range p.pod.Spec.InitContainers {
		order = append(order, c.Name)
	}
	for _, c := range p.pod.Spec.Containers {
		order = append(order, c.Name)
	}
	for _, name := range order {
		if k, ok := p.kills[name]; ok {
			a.Kill = append(a.Kill, k)
			delete(p.kills, name)
		}
	}
	var rest []string
	for name := range p.kills {
		rest = append(rest, name)
	}
	slices.Sort(rest)
	for _, name := range rest {
		a.Kill = append(a.Kill, p.kills[name])
	}
	p.kills = nil
}

// finish applies the back-off checks the kubelet's SyncPod makes before
// each start (doBackOff, then the image manager's pull back-off). A
// regular init container in back-off stops the rest of the sync, as in
// SyncPod; a sidecar or regular container in back-off is skipped.
func (p *planner) finish(a *PodActions, now time.Time, bo BackoffPolicy) {
	// Ephemeral containers start first (SyncPod's step 5): an init
	// container in back-off does not hold them.
	var eph []ContainerAction
	for _, s := range a.StartEphemeral {
		if w, ok := p.backedOff(model.SpecContainer(p.pod, s.Name), s, now, bo); ok {
			a.BackOff = append(a.BackOff, w)
			continue
		}
		eph = append(eph, s)
	}
	a.StartEphemeral = eph
	var inits []ContainerAction
	for _, s := range a.StartInit {
		c := model.SpecContainer(p.pod, s.Name)
		if w, ok := p.backedOff(c, s, now, bo); ok {
			a.BackOff = append(a.BackOff, w)
			if !model.IsRestartableInitContainer(c) {
				a.StartInit = inits
				a.Start = nil
				return
			}
			continue
		}
		inits = append(inits, s)
	}
	a.StartInit = inits
	var starts []ContainerAction
	for _, s := range a.Start {
		if w, ok := p.backedOff(model.SpecContainer(p.pod, s.Name), s, now, bo); ok {
			a.BackOff = append(a.BackOff, w)
			continue
		}
		starts = append(starts, s)
	}
	a.Start = starts
}

func (p *planner) backedOff(c *corev1.Container, s ContainerAction, now time.Time, bo BackoffPolicy) (ContainerAction, bool) {
	// CrashLoopBackoff is never active without an exited instance; the
	// check spares a container that never ran the hash of its spec.
	if p.hasExited(c.Name) {
		if b := CrashLoopBackoff(p.pod, c, p.view, bo); b.Active(now) {
			return ContainerAction{Name: c.Name, Attempt: s.Attempt, Reason: ReasonCrashLoopBackOff,
				Message: CrashLoopMessage(p.pod, c.Name, b.Delay), NextAttempt: b.Until}, true
		}
	}
	if b := ImagePullBackoff(p.pod, c, p.view, bo); b.Active(now) {
		return ContainerAction{Name: c.Name, Attempt: s.Attempt, Reason: ReasonImagePullBackOff,
			Message: fmt.Sprintf("Back-off pulling image %q", c.Image), NextAttempt: b.Until}, true
	}
	return ContainerAction{}, false
}

// hasExited reports whether the view holds an exited instance of the
// named container.
func (p *planner) hasExited(name string) bool {
	for i := range p.view.Containers {
		if inst := &p.view.Containers[i]; inst.Name == name && inst.State == model.ContainerExited {
			return true
		}
	}
	return false
}
