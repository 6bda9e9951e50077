package podstatus

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/model"
)

// getPhase is the kubelet's getPhase (pkg/kubelet/kubelet_pods.go, v1.37)
// with ContainerRestartRules on, its default: a failed init container or a
// stopped regular container counts as not restartable when
// containerShouldRestart says so. podHasInitialized is the kubelet's
// HasAnyActiveRegularContainerStarted.
//
// NOTE(podsync): a port that keeps upstream's shape (its counts over init
// and regular containers and its decision cascade in upstream's order),
// so it is longer than this repository's 80-line bound. The
// RestartAllContainers reason upstream also counts as restartable cannot
// occur: podsync refuses container restart rules.
func getPhase(pod *corev1.Pod, info []corev1.ContainerStatus, podIsTerminal, podHasInitialized bool) corev1.PodPhase {
	spec := pod.Spec
	pendingRestartableInit, pendingRegularInit := 0, 0
	failedInitNotRestartable := 0
	initFailed := func(c *corev1.Container, exitCode int32) {
		if exitCode != 0 && !model.ContainerShouldRestart(&spec, c, exitCode) {
			failedInitNotRestartable++
		}
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if model.IsRestartableInitContainer(c) {
			continue
		}
		st := findStatus(info, c.Name)
		switch {
		case st == nil:
			pendingRegularInit++
		case st.State.Running != nil:
			pendingRegularInit++
		case st.State.Terminated != nil:
			initFailed(c, st.State.Terminated.ExitCode)
		case st.State.Waiting != nil:
			if t := st.LastTerminationState.Terminated; t != nil {
				initFailed(c, t.ExitCode)
			} else {
				pendingRegularInit++
			}
		default:
			pendingRegularInit++
		}
	}
	unknown, running, waiting, stopped, stoppedNotRestartable, succeeded := 0, 0, 0, 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if !model.IsRestartableInitContainer(c) {
			continue
		}
		st := findStatus(info, c.Name)
		switch {
		case st == nil:
			unknown++
		case st.State.Running != nil:
			if st.Started == nil || !*st.Started {
				pendingRestartableInit++
			}
			running++
		case st.State.Terminated != nil:
		case st.State.Waiting != nil:
			if st.LastTerminationState.Terminated == nil {
				pendingRestartableInit++
				waiting++
			}
		default:
			pendingRestartableInit++
			unknown++
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		st := findStatus(info, c.Name)
		switch {
		case st == nil:
			unknown++
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if !model.ContainerShouldRestart(&spec, c, st.State.Terminated.ExitCode) {
				stoppedNotRestartable++
			}
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if t := st.LastTerminationState.Terminated; t != nil {
				stopped++
				if !model.ContainerShouldRestart(&spec, c, t.ExitCode) {
					stoppedNotRestartable++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInitNotRestartable > 0 {
		return corev1.PodFailed
	}
	switch {
	case pendingRegularInit > 0 || (pendingRestartableInit > 0 && !podHasInitialized):
		return corev1.PodPending
	case waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if podIsTerminal {
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		}
		if stopped != stoppedNotRestartable {
			// At least one container is in the process of restarting.
			return corev1.PodRunning
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	default:
		return corev1.PodPending
	}
}
