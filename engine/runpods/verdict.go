package runpods

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/logs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// verdict says whether st decides the pod's run at now, and how; when it
// does not, recheck, if positive, is when a container that runs will have
// run minReady.
func verdict(pod *corev1.Pod, st *corev1.PodStatus, target WaitFor, now time.Time, minReady time.Duration) (done bool, o Outcome, reason, msg string, recheck time.Duration) {
	switch st.Phase {
	case corev1.PodFailed:
		return true, Failed, ReasonPodFailed, phaseMessage(st, "pod failed"), 0
	case corev1.PodSucceeded:
		if target == Succeeded {
			return true, ReachedTarget, "", "", 0
		}
		return true, Failed, ReasonPodCompleted, fmt.Sprintf("pod completed before it was %s", strings.ToLower(target.String())), 0
	}
	if target != Succeeded {
		// A container that exited and waits out its back-off has not
		// stayed up: the pod will not be running as asked without a
		// change (a Job's retries are waited for under Succeeded).
		for _, cs := range slices.Concat(st.InitContainerStatuses, st.ContainerStatuses) {
			if w := cs.State.Waiting; w != nil && w.Reason == ReasonCrashLoopBackOff {
				return true, Failed, ReasonCrashLoopBackOff, crashLoopMessage(cs), 0
			}
		}
	}
	switch target {
	case Running:
		if allRunning(pod, st) {
			if wait := settling(pod, st, now, minReady); wait > 0 {
				return false, 0, "", "", wait
			}
			return true, ReachedTarget, "", "", 0
		}
	case Ready:
		for _, c := range st.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, ReachedTarget, "", "", 0
			}
		}
	}
	return false, 0, "", "", 0
}

// settling returns how long, at most, until every regular container has
// stayed up minReady since its last start, or 0 when all have; a
// container with a readiness probe settles when it is ready (a status
// says so), and counts as minReady until then.
func settling(pod *corev1.Pod, st *corev1.PodStatus, now time.Time, minReady time.Duration) time.Duration {
	if minReady <= 0 {
		return 0
	}
	var wait time.Duration
	for _, c := range pod.Spec.Containers {
		i := slices.IndexFunc(st.ContainerStatuses, func(cs corev1.ContainerStatus) bool { return cs.Name == c.Name })
		if i < 0 {
			continue
		}
		cs := st.ContainerStatuses[i]
		if c.ReadinessProbe != nil {
			if !cs.Ready {
				wait = max(wait, minReady) // re-looked at on its next status
			}
			continue
		}
		if up := now.Sub(cs.State.Running.StartedAt.Time); up < minReady {
			wait = max(wait, minReady-up)
		}
	}
	return wait
}

// crashLoopMessage says which container crash-loops, how it last ended
// and how often it was restarted.
func crashLoopMessage(cs corev1.ContainerStatus) string {
	msg := fmt.Sprintf("container %s exited", cs.Name)
	if t := cs.LastTerminationState.Terminated; t != nil {
		msg += fmt.Sprintf(" with code %d", t.ExitCode)
		if t.Reason != "" {
			msg += " (" + t.Reason + ")"
		}
		if !t.StartedAt.IsZero() && !t.FinishedAt.IsZero() {
			msg += fmt.Sprintf(" after %s", t.FinishedAt.Sub(t.StartedAt.Time).Round(100*time.Millisecond))
		}
	}
	return msg + fmt.Sprintf(" and is restarted with back-off (%d restarts)", cs.RestartCount)
}

// timeoutMessage says what keeps the pod from its target when its timeout
// expires: for each container not yet there, its state (the waiting
// reason and message) and its last event.
func (r *run) timeoutMessage(ctx context.Context, pod *corev1.Pod, st *corev1.PodStatus) string {
	msg := fmt.Sprintf("pod did not reach %s within %s", r.req.WaitFor, r.req.Timeout)
	var last map[string]*store.Event
	if evs, _, err := r.opts.Pods.Events(ctx, store.EventFilter{UID: pod.UID}); err == nil {
		last = map[string]*store.Event{}
		for _, e := range evs {
			last[e.Event.Container] = e.Event // oldest first: the newest stays
		}
	}
	var why []string
	for _, cs := range slices.Concat(st.InitContainerStatuses, st.ContainerStatuses) {
		var state string
		switch {
		case cs.State.Waiting != nil:
			state = "waiting"
			if w := cs.State.Waiting; w.Reason != "" {
				state += ": " + w.Reason
				if w.Message != "" {
					state += ": " + strings.Join(strings.Fields(w.Message), " ")
				}
			}
		case cs.State.Running != nil && r.req.WaitFor == Ready && !cs.Ready:
			state = "running, not ready"
		case cs.State.Running != nil && r.req.WaitFor == Running:
			if settling(pod, &corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}, r.opts.Clock.Now(), r.req.MinReady) > 0 {
				state = "running, not settled"
			}
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
			state = fmt.Sprintf("terminated: %s (exit code %d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
		if state == "" {
			continue
		}
		line := fmt.Sprintf("container %s %s", cs.Name, state)
		if e := last[cs.Name]; e != nil {
			line += fmt.Sprintf("; last event: %s %s", e.Type, e.Reason)
			if e.Count > 1 {
				line += fmt.Sprintf(" (x%d)", e.Count)
			}
			if m := strings.Join(strings.Fields(e.Message), " "); m != "" {
				line += ": " + m
			}
		}
		why = append(why, line)
	}
	if len(why) == 0 {
		if e := last[""]; e != nil {
			why = append(why, fmt.Sprintf("last event: %s %s: %s", e.Type, e.Reason, strings.Join(strings.Fields(e.Message), " ")))
		}
	}
	if len(why) > 0 {
		msg += ": " + strings.Join(why, "; ")
	}
	return msg
}

func phaseMessage(st *corev1.PodStatus, def string) string {
	if st.Message != "" {
		return st.Message
	}
	return def
}

// allRunning is the kubelet's run-once isPodRunning: every regular
// container has a running status.
func allRunning(pod *corev1.Pod, st *corev1.PodStatus) bool {
	for _, c := range pod.Spec.Containers {
		i := slices.IndexFunc(st.ContainerStatuses, func(cs corev1.ContainerStatus) bool { return cs.Name == c.Name })
		if i < 0 || st.ContainerStatuses[i].State.Running == nil {
			return false
		}
	}
	return true
}

// failedContainers lists the containers that keep the pod from its target:
// terminated with a non-zero code, or waiting for a reason other than
// starting up, with the tail of their last instance's log.
func (r *run) failedContainers(ctx context.Context, pod *corev1.Pod, st *corev1.PodStatus) []FailedContainer {
	var out []FailedContainer
	add := func(cs corev1.ContainerStatus, typ syncer.ContainerType) {
		fc := FailedContainer{Name: cs.Name, ContainerType: typ, RestartCount: cs.RestartCount}
		term := cs.State.Terminated
		if term == nil && cs.State.Waiting != nil {
			term = cs.LastTerminationState.Terminated
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			return
		case cs.State.Waiting != nil && !isStartingReason(cs.State.Waiting.Reason):
			fc.Reason, fc.Message = cs.State.Waiting.Reason, cs.State.Waiting.Message
		case cs.State.Terminated != nil:
			fc.Reason, fc.Message = cs.State.Terminated.Reason, cs.State.Terminated.Message
		default:
			return
		}
		if term != nil {
			code := term.ExitCode
			fc.ExitCode = &code
			if fc.Message == "" {
				fc.Message = term.Message
			}
		}
		fc.LogTail = r.logTail(ctx, pod, cs.Name)
		out = append(out, fc)
	}
	for _, cs := range st.InitContainerStatuses {
		typ := syncer.ContainerTypeInit
		if i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == cs.Name }); i >= 0 && model.IsRestartableInitContainer(&pod.Spec.InitContainers[i]) {
			typ = syncer.ContainerTypeSidecar
		}
		add(cs, typ)
	}
	for _, cs := range st.ContainerStatuses {
		add(cs, syncer.ContainerTypeRegular)
	}
	return out
}

func isStartingReason(reason string) bool {
	return reason == "" || reason == "ContainerCreating" || reason == "PodInitializing"
}

// logTail returns the last lines of the container's newest log file.
func (r *run) logTail(ctx context.Context, pod *corev1.Pod, container string) []string {
	files := logs.ContainerLogFiles(pod, criconfig.Options{PodLogDir: r.opts.PodLogDir}, container)
	if len(files) == 0 {
		return nil
	}
	path := files[len(files)-1]
	lines, err := logs.TailLines(ctx, path, logTailLines, logTailBytes)
	if err != nil {
		r.opts.Logger.Warn("run pods: read log tail", zap.String("path", path), zap.Error(err))
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, string(l.Content))
	}
	return out
}
