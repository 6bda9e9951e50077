package podstatus

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
)

// The kubelet's container waiting and terminated reasons.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
	ReasonErrImagePull      = "ErrImagePull"
	ReasonCompleted         = "Completed"
	ReasonError             = "Error"
	ReasonOOMKilled         = plan.ReasonOOMKilled
	ReasonStatusUnknown     = "ContainerStatusUnknown"
)

// StatusOptions are the node facts ComputePodStatus needs.
type StatusOptions struct {
	// Backoff is the crash-loop and image-pull back-off policy.
	Backoff plan.BackoffPolicy
	// HostIPs are the node's IPs, primary first; host-network pods report
	// them as pod IPs.
	HostIPs []string
	// RuntimeName prefixes container IDs ("containerd://…"); empty means
	// "containerd".
	RuntimeName string
	// StartFailures are the waiting reasons of the containers whose last
	// start attempt failed (ErrImagePull, ErrImageNeverPull,
	// CreateContainerConfigError, RunContainerError, …), by container
	// name: the kubelet's ReasonCache, kept by the caller from the steps
	// of its passes. A container that is due to start shows its entry as
	// its waiting state, before any back-off computed from the view. Nil
	// means none.
	StartFailures map[string]corev1.ContainerStateWaiting
	// ResizePending is the resize the node has not admitted (the last
	// pass's plan.PodActions.ResizePending): the PodResizePending
	// condition, and the containers' allocated resources are those they
	// run with. Nil means none.
	ResizePending *plan.ResizePending
	// ResizeError is the message of the last pass's failed resize step:
	// the PodResizeInProgress condition's, with reason Error.
	ResizeError string
	// Generation is the generation of the pod record the status is of:
	// the status's observedGeneration, as the kubelet reports the
	// metadata.generation of the pod it synced.
	Generation int64
}

// ComputePodStatus derives pod's status from the runtime view, probe
// results and the time, as the kubelet's generateAPIPodStatus with its
// prober's UpdatePodStatus: container statuses, phase (getPhase; terminal
// phases stick; an exceeded activeDeadlineSeconds fails the pod),
// conditions, pod IPs and start time. pod.Status is read as the previous
// status. It is pure.
func ComputePodStatus(pod *corev1.Pod, view model.RuntimeView, probes model.ProbeResults, now time.Time, opts StatusOptions) corev1.PodStatus {
	old := pod.Status
	s := corev1.PodStatus{QOSClass: model.GetPodQOS(pod), ObservedGeneration: opts.Generation}
	hasInit := len(pod.Spec.InitContainers) > 0
	sc := statusConverter{pod: pod, view: &view, probes: probes, now: now, opts: opts}
	reason, _ := plan.PodNotRunnable(pod, &view, now)
	sc.notRunnable = reason != ""
	s.InitContainerStatuses = sc.convert(pod.Spec.InitContainers, old.InitContainerStatuses, hasInit, true)
	s.ContainerStatuses = sc.convert(pod.Spec.Containers, old.ContainerStatuses, hasInit, false)
	// Ephemeral containers as the kubelet's convertToAPIContainerStatuses
	// shows them: as init containers (never restarted), but never ready:
	// the kubelet's prober manager sets the readiness of regular and init
	// containers only, so a debug container that exited 0 is not ready
	// either.
	if n := len(pod.Spec.EphemeralContainers); n > 0 {
		ecs := make([]corev1.Container, n)
		for i := range pod.Spec.EphemeralContainers {
			ecs[i] = corev1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		}
		s.EphemeralContainerStatuses = sc.convert(ecs, old.EphemeralContainerStatuses, hasInit, true)
		for i := range s.EphemeralContainerStatuses {
			s.EphemeralContainerStatuses[i].Ready = false
		}
	}

	podIsTerminal := pod.DeletionTimestamp != nil && !anyRunning(&view)
	all := append(slices.Clone(s.ContainerStatuses), s.InitContainerStatuses...)
	s.Phase = getPhase(pod, all, podIsTerminal, view.HasAnyActiveRegularContainerStarted(pod))
	if s.Phase != corev1.PodFailed && s.Phase != corev1.PodSucceeded &&
		(old.Phase == corev1.PodFailed || old.Phase == corev1.PodSucceeded) {
		s.Phase = old.Phase
	}
	if s.Phase == old.Phase {
		s.Reason, s.Message = old.Reason, old.Message
	}
	if plan.ActiveDeadlineExceeded(pod, now) {
		s.Phase = corev1.PodFailed
		s.Reason, s.Message = plan.KillReasonDeadlineExceeded, plan.ActiveDeadlineMessage
	} else if s.Phase != corev1.PodSucceeded && plan.BackoffLimitExceeded(pod, &view) {
		s.Phase = corev1.PodFailed
		s.Reason, s.Message = plan.KillReasonBackoffLimitExceeded, plan.BackoffLimitMessage
	}

	conds := []corev1.PodCondition{
		podReadyToStartContainersCondition(pod, &view),
		podInitializedCondition(pod, all, s.Phase),
		podReadyCondition(pod, all, s.Phase),
		containersReadyCondition(pod, all, s.Phase),
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	}
	conds = append(conds, resizeConditions(pod, &view, opts)...)
	for i := range conds {
		conds[i].LastTransitionTime = metav1.NewTime(now)
		for _, o := range old.Conditions {
			if o.Type == conds[i].Type && o.Status == conds[i].Status {
				conds[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	// The kubelet's generateAPIPodStatus: the DisruptionTarget condition
	// an eviction or a preemption set is copied over, not re-generated.
	if i := slices.IndexFunc(old.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.DisruptionTarget }); i >= 0 {
		conds = append(conds, old.Conditions[i])
	}
	s.Conditions = conds

	for _, ip := range opts.HostIPs {
		s.HostIPs = append(s.HostIPs, corev1.HostIP{IP: ip})
	}
	if len(opts.HostIPs) > 0 {
		s.HostIP = opts.HostIPs[0]
	}
	var ips []string
	switch {
	case pod.Spec.HostNetwork:
		ips = opts.HostIPs
	case len(view.Sandboxes) > 0 && view.Sandboxes[0].State == model.SandboxReady:
		ips = view.Sandboxes[0].IPs
	}
	for _, ip := range ips {
		s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(s.PodIPs) == 0 {
		s.PodIPs = old.PodIPs
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}

	switch {
	case old.StartTime != nil:
		s.StartTime = old.StartTime
	case len(view.Sandboxes) > 0:
		t := metav1.NewTime(view.Sandboxes[len(view.Sandboxes)-1].CreatedAt)
		s.StartTime = &t
	default:
		t := metav1.NewTime(now)
		s.StartTime = &t
	}
	truncateTerminationMessages(pod, &s)
	return s
}

// MaxPodTerminationMessageLogLength is the most bytes of termination
// messages one pod's status holds, the kubelet's
// (pkg/kubelet/container/runtime.go).
const MaxPodTerminationMessageLogLength = 1024 * 12

// truncateTerminationMessages cuts each container's termination messages
// (of its state and its last termination state) to an equal share of
// MaxPodTerminationMessageLogLength, as the kubelet's status manager
// (normalizeStatus) does, so that many containers cannot make a pod's
// status, and the store's record of it, grow without bound.
func truncateTerminationMessages(pod *corev1.Pod, s *corev1.PodStatus) {
	per := MaxPodTerminationMessageLogLength
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers) + len(pod.Spec.EphemeralContainers); n > 0 {
		per /= n
	}
	cut := func(st *corev1.ContainerState) {
		if t := st.Terminated; t != nil && len(t.Message) > per {
			t.Message = t.Message[:per]
		}
	}
	for _, list := range [][]corev1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			cut(&list[i].State)
			cut(&list[i].LastTerminationState)
		}
	}
}

func anyRunning(view *model.RuntimeView) bool {
	return slices.ContainsFunc(view.Containers, func(c model.ContainerInstance) bool { return c.State == model.ContainerRunning })
}

type statusConverter struct {
	pod    *corev1.Pod
	view   *model.RuntimeView
	probes model.ProbeResults
	now    time.Time
	opts   StatusOptions
	// allocated is plan.AllocatedPod, built once when a resize is pending.
	allocated *corev1.Pod
	// notRunnable: the pod only stops (plan.PodNotRunnable), so no
	// container waits to start again.
	notRunnable bool
}

func (sc *statusConverter) containerID(id string) string {
	rt := sc.opts.RuntimeName
	if rt == "" {
		rt = "containerd"
	}
	return rt + "://" + id
}

// state converts one instance (the kubelet's convertContainerStatus).
func (sc *statusConverter) state(inst *model.ContainerInstance) corev1.ContainerState {
	switch inst.State {
	case model.ContainerRunning:
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(inst.StartedAt)}}
	case model.ContainerExited:
		reason := inst.Reason
		if reason == "" {
			// containerd always sets one; default as it does.
			reason = ReasonCompleted
			if inst.ExitCode != 0 {
				reason = ReasonError
			}
		}
		msg := inst.Message
		if inst.TerminationMessage != "" {
			if msg != "" {
				msg += ": "
			}
			msg += inst.TerminationMessage
		}
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode:    inst.ExitCode,
			Reason:      reason,
			Message:     msg,
			StartedAt:   metav1.NewTime(inst.StartedAt),
			FinishedAt:  metav1.NewTime(inst.FinishedAt),
			ContainerID: sc.containerID(inst.ID),
		}}
	default:
		// Created and unknown instances are waiting to run.
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}
	}
}

// convert is the kubelet's convertToAPIContainerStatuses plus the prober's
// started and ready.
func (sc *statusConverter) convert(containers []corev1.Container, oldStatuses []corev1.ContainerStatus, hasInit, isInit bool) []corev1.ContainerStatus {
	if len(containers) == 0 {
		return nil
	}
	defaultWaiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}}
	if hasInit {
		defaultWaiting = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonPodInitializing}}
	}
	out := make([]corev1.ContainerStatus, 0, len(containers))
	for i := range containers {
		c := &containers[i]
		st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: defaultWaiting}
		if o := findStatus(oldStatuses, c.Name); o != nil {
			if o.State.Terminated != nil {
				st = *o.DeepCopy()
			} else {
				st.RestartCount = o.RestartCount
				st.LastTerminationState = *o.LastTerminationState.DeepCopy()
			}
		}
		old := findStatus(oldStatuses, c.Name)
		if inst := sc.view.FindContainer(c.Name); inst == nil && old != nil && old.State.Running != nil &&
			st.State.Waiting != nil && st.LastTerminationState.Terminated == nil {
			// The container was running and is gone: show it stopped, not
			// waiting, so the pod does not go back to Pending.
			st.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
				Reason:   ReasonStatusUnknown,
				Message:  "The container could not be located when the pod was deleted.  The container used to be Running",
				ExitCode: 137,
			}
			if sc.pod.DeletionTimestamp == nil {
				st.RestartCount++
			}
		}
		seen := 0
		for j := range sc.view.Containers {
			inst := &sc.view.Containers[j]
			if inst.Name != c.Name {
				continue
			}
			if seen == 0 {
				st = corev1.ContainerStatus{
					Name:         c.Name,
					Image:        inst.Image,
					ImageID:      inst.ImageRef,
					ContainerID:  sc.containerID(inst.ID),
					RestartCount: inst.RestartCount,
					State:        sc.state(inst),
				}
				if inst.State == model.ContainerUnknown && old != nil && old.State.Running != nil {
					st.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						Reason:   ReasonStatusUnknown,
						Message:  "The container could not be located when the pod was terminated",
						ExitCode: 137,
					}}
					st.RestartCount = old.RestartCount + 1
				}
				if st.Image == "" {
					st.Image = c.Image
				}
				sc.resources(c, inst, &st)
			} else {
				st.LastTerminationState = sc.state(inst)
			}
			seen++
			if seen == 2 {
				break
			}
		}
		sc.waitingReason(c, &st, isInit)
		sc.probe(c, &st, isInit)
		out = append(out, st)
	}
	return out
}

// waitingReason replaces the state of a container the next sync would
// start but cannot yet by a waiting state with the reason (the kubelet
// takes it from its reason cache; podsync recomputes it).
func (sc *statusConverter) waitingReason(c *corev1.Container, st *corev1.ContainerStatus, isInit bool) {
	if sc.notRunnable {
		return
	}
	inst := sc.view.FindContainer(c.Name)
	if isInit && inst != nil && inst.State == model.ContainerExited && inst.ExitCode == 0 {
		return
	}
	if inst != nil && model.EphemeralContainer(sc.pod, c.Name) != nil {
		// An ephemeral container is never restarted: its state is its
		// instance's.
		return
	}
	if _, ok := plan.ShouldContainerBeRestarted(c, sc.pod, sc.view); !ok {
		return
	}
	var w *corev1.ContainerStateWaiting
	if f, ok := sc.opts.StartFailures[c.Name]; ok && f.Reason != "" {
		w = &f
	} else if b := plan.CrashLoopBackoff(sc.pod, c, sc.view, sc.opts.Backoff); b.Active(sc.now) {
		w = &corev1.ContainerStateWaiting{Reason: plan.ReasonCrashLoopBackOff, Message: plan.CrashLoopMessage(sc.pod, c.Name, b.Delay)}
	} else if f := sc.view.PullFailure(c.Image); f != nil && f.Failures > 0 {
		if plan.ImagePullBackoff(sc.pod, c, sc.view, sc.opts.Backoff).Active(sc.now) {
			w = &corev1.ContainerStateWaiting{Reason: plan.ReasonImagePullBackOff, Message: model.PullBackOffMessage(c.Image, f)}
		} else {
			w = &corev1.ContainerStateWaiting{Reason: cmp.Or(f.Reason, ReasonErrImagePull), Message: f.Message}
		}
	}
	if w == nil {
		return
	}
	if st.State.Terminated != nil {
		st.LastTerminationState = st.State
	}
	st.State = corev1.ContainerState{Waiting: w}
}

// probe sets started and ready as the kubelet's prober manager does.
func (sc *statusConverter) probe(c *corev1.Container, st *corev1.ContainerStatus, isInit bool) {
	started := false
	if st.State.Running != nil {
		id := sc.view.FindContainer(c.Name).ID
		if r, ok := sc.probes.Startup[id]; ok && r != model.ProbeUnknown {
			started = r == model.ProbeSuccess
		} else {
			started = c.StartupProbe == nil
		}
	}
	st.Started = &started
	if isInit && !model.IsRestartableInitContainer(c) {
		st.Ready = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
		return
	}
	if !started {
		return
	}
	id := sc.view.FindContainer(c.Name).ID
	if sc.probes.Readiness[id] == model.ProbeSuccess {
		st.Ready = true
	} else {
		st.Ready = c.ReadinessProbe == nil
	}
}

func findStatus(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}
