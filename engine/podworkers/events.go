package podworkers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// The kubelet's event reasons (pkg/kubelet/events).
const (
	EventPulling             = "Pulling"
	EventPulled              = "Pulled"
	EventFailed              = "Failed"
	EventBackOff             = "BackOff"
	EventCreated             = "Created"
	EventStarted             = "Started"
	EventKilling             = "Killing"
	EventUnhealthy           = "Unhealthy"
	EventSandboxChanged      = "SandboxChanged"
	EventFailedCreateSandbox = "FailedCreatePodSandBox"
	EventFailedKillPod       = "FailedKillPod"
	EventFailedMount         = "FailedMount"
	EventFailedPostStartHook = "FailedPostStartHook"
	EventFailedPreStopHook   = "FailedPreStopHook"
	EventErrImageNeverPull   = "ErrImageNeverPull"
)

// noteStarts updates w's reason cache from a pass's start steps, as the
// kubelet's ReasonCache: a failed start records its reason and message, a
// successful start or a back-off (whose waiting reason the status
// computes from the view) clears it. The caller holds w's lock.
func (w *worker) noteStarts(steps []syncer.StepResult) {
	for _, s := range steps {
		if s.Action != syncer.ActionStartContainer {
			continue
		}
		switch {
		case s.Err != nil:
			w.reasons[s.Target] = corev1.ContainerStateWaiting{Reason: s.Reason, Message: s.Message}
		default:
			delete(w.reasons, s.Target)
		}
	}
}

// stepEvents returns the events of a pass, as the kubelet records them:
// SandboxChanged first when its plan replaces a sandbox it carries (the
// kubelet's SyncPod records it before it kills), then those of its steps.
// A back-off is reported once per wait, not on every pass that meets it.
// The caller holds w's lock.
func (w *worker) stepEvents(pod *corev1.Pod, res syncer.SyncResult) []store.Change {
	ref := store.RefOf(pod)
	var out []store.Change
	add := func(typ, reason, container, msg string) {
		out = append(out, store.EventChange(ref, store.Event{Type: typ, Reason: reason, Container: container, Message: msg}))
	}
	const normal, warning = corev1.EventTypeNormal, corev1.EventTypeWarning
	if sb := res.Plan.Sandbox; sb.Create && sb.PreviousID != "" {
		add(normal, EventSandboxChanged, "", "Pod sandbox changed, it will be killed and re-created.")
	}
	for _, s := range res.Steps {
		c := s.ContainerName()
		switch s.Action {
		case syncer.ActionPullImage:
			add(normal, EventPulling, "", fmt.Sprintf("Pulling image %q", s.Target))
			if s.Err != nil {
				add(warning, EventFailed, "", fmt.Sprintf("Failed to pull image %q: %s", s.Target, s.Message))
			} else {
				add(normal, EventPulled, "", s.Message)
			}
		case syncer.ActionStartContainer:
			if s.ImagePresent {
				add(normal, EventPulled, c, fmt.Sprintf("Container image %q already present on machine", specImage(pod, c)))
			}
			switch {
			case s.BackedOff():
				if w.backoffs[c].Equal(s.NextRetry) {
					continue
				}
				w.backoffs[c] = s.NextRetry
				if s.Reason == plan.ReasonImagePullBackOff {
					// The image manager's event, then the start's
					// failure (kuberuntime's startContainer).
					add(normal, EventBackOff, c, fmt.Sprintf("Back-off pulling image %q", specImage(pod, c)))
					add(warning, EventFailed, c, "Error: "+plan.ReasonImagePullBackOff)
					continue
				}
				add(warning, EventBackOff, c, fmt.Sprintf("Back-off restarting failed container %s in pod %s", c, model.PodString(pod)))
			case s.Err != nil && s.Reason == syncer.ReasonPostStartHookError:
				// The kubelet's FailedPostStartHook event (from the
				// PostStartHook step) is the only one: the start's
				// message holds what the hook printed.
			case s.Err != nil:
				if s.Reason == syncer.ReasonErrImageNeverPull {
					add(warning, EventErrImageNeverPull, c, s.Message)
				}
				add(warning, EventFailed, c, "Error: "+s.Reason+": "+s.Message)
			default:
				delete(w.backoffs, c)
				add(normal, EventCreated, c, "Created container: "+c)
				add(normal, EventStarted, c, "Started container "+c)
			}
		case syncer.ActionKillContainer:
			if s.Err != nil {
				add(warning, EventFailedKillPod, c, s.Message)
				continue
			}
			msg := "Stopping container " + c
			switch s.Reason {
			case plan.ReasonLivenessProbe:
				msg = fmt.Sprintf("Container %s failed liveness probe, will be restarted", c)
			case plan.ReasonStartupProbe:
				msg = fmt.Sprintf("Container %s failed startup probe, will be restarted", c)
			case plan.ReasonDefinitionChanged:
				msg = fmt.Sprintf("Container %s definition changed, will be restarted", c)
			case syncer.ReasonFailedPostStartHook:
				msg = s.Message
			case plan.ReasonResizeRestart:
				msg = fmt.Sprintf("Container %s resize requires restart", c)
			}
			add(normal, EventKilling, c, msg)
		case syncer.ActionCreatePodSandbox:
			if s.Err != nil {
				add(warning, EventFailedCreateSandbox, "", "Failed to create pod sandbox: "+s.Cause)
			}
		case syncer.ActionKillPodSandbox:
			if s.Err != nil {
				add(warning, EventFailedKillPod, "", s.Message)
			}
		case syncer.ActionMountVolumes:
			if s.Err != nil {
				add(warning, EventFailedMount, "", s.Message)
			}
		case syncer.ActionPostStartHook:
			// Never what the hook printed: events are every reader's
			// (the kubelet's words, kuberuntime_container.go).
			if s.Err != nil {
				add(warning, EventFailedPostStartHook, c, syncer.PostStartHookFailedMessage)
			}
		case syncer.ActionPreStopHook:
			if s.Err != nil {
				add(warning, EventFailedPreStopHook, c, "PreStopHook failed")
			}
		}
	}
	return out
}

// specImage returns the image of the pod's container named name, or "".
func specImage(pod *corev1.Pod, name string) string {
	if c := model.SpecContainer(pod, name); c != nil {
		return c.Image
	}
	return ""
}
