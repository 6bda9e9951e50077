package cli

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
)

// podSummary is what the tables show of a pod, computed as kubectl's pod
// printer (pkg/printers/internalversion, printPod) does.
type podSummary struct {
	// Ready is "ready/total", counting regular containers and sidecars.
	Ready string
	// Status is kubectl's STATUS: the phase, or a more telling reason such
	// as Init:0/1, Init:Error, CrashLoopBackOff, Completed, NotReady.
	Status string
	// Restarts is the restart count, with the time of the last restart
	// when there was one: "3 (45s ago)".
	Restarts string
	// RestartCount is the bare restart count.
	RestartCount int
}

// summarizePod computes the columns kubectl shows for a pod from its spec
// and status. now is the reference for "ago".
//
// It is a port of printPod in kubernetes/kubernetes
// pkg/printers/internalversion/printers.go, the printer behind kubectl get
// pods, and its shape mirrors upstream's on purpose (the init containers in
// order, then the regular containers from last to first, then the
// Completed-but-running correction) so that the two compare line by line;
// that is why it is longer than 80 lines. Left out: the SchedulingGated
// reason (podsync has no scheduler), the table row's cells and conditions,
// and the deletion rules (writePodTable shows Terminating).
func summarizePod(spec *podsyncv1.PodSpec, pst *podsyncv1.PodStatus, now time.Time) podSummary {
	st := convert.PodStatusFromProto(pst)
	if st == nil {
		st = &corev1.PodStatus{}
	}
	restartable := map[string]bool{}
	total := len(spec.GetContainers())
	for _, c := range spec.GetInitContainers() {
		if c.GetRestartPolicy() == string(corev1.ContainerRestartPolicyAlways) {
			restartable[c.GetName()] = true
			total++
		}
	}
	nInit := len(spec.GetInitContainers())

	reason := string(st.Phase)
	if st.Reason != "" {
		reason = st.Reason
	}
	if reason == "" {
		reason = string(corev1.PodPending)
	}
	restarts, sidecarRestarts, ready := 0, 0, 0
	var lastRestart, lastSidecarRestart time.Time
	later := func(t *time.Time, cs corev1.ContainerStatus) {
		if term := cs.LastTerminationState.Terminated; term != nil && term.FinishedAt.After(*t) {
			*t = term.FinishedAt.Time
		}
	}

	initializing := false
	for i, cs := range st.InitContainerStatuses {
		restarts += int(cs.RestartCount)
		later(&lastRestart, cs)
		if restartable[cs.Name] {
			sidecarRestarts += int(cs.RestartCount)
			later(&lastSidecarRestart, cs)
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case restartable[cs.Name] && cs.Started != nil && *cs.Started:
			if cs.Ready {
				ready++
			}
			continue
		case cs.State.Terminated != nil:
			switch t := cs.State.Terminated; {
			case t.Reason != "":
				reason = "Init:" + t.Reason
			case t.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + cs.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, nInit)
		}
		initializing = true
		break
	}

	if !initializing || conditionTrue(st, corev1.PodInitialized) {
		restarts, lastRestart = sidecarRestarts, lastSidecarRestart
		hasRunning := false
		for i := len(st.ContainerStatuses) - 1; i >= 0; i-- {
			cs := st.ContainerStatuses[i]
			restarts += int(cs.RestartCount)
			later(&lastRestart, cs)
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				reason = cs.State.Waiting.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
				reason = cs.State.Terminated.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", cs.State.Terminated.Signal)
			case cs.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode)
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		// A pod with a container still running is not Completed.
		if reason == "Completed" && hasRunning {
			if conditionTrue(st, corev1.PodReady) {
				reason = string(corev1.PodRunning)
			} else {
				reason = "NotReady"
			}
		}
	}

	out := podSummary{
		Ready:        fmt.Sprintf("%d/%d", ready, total),
		Status:       reason,
		Restarts:     strconv.Itoa(restarts),
		RestartCount: restarts,
	}
	if restarts != 0 && !lastRestart.IsZero() {
		out.Restarts = fmt.Sprintf("%d (%s ago)", restarts, age(lastRestart, now))
	}
	return out
}

func conditionTrue(st *corev1.PodStatus, t corev1.PodConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// age renders the time since t as kubectl does ("5m2s", "3d"), or
// "<unknown>" for the zero time.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
