package podstatus

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/plan"
)

// getPhase is the kubelet's getPhase (pkg/kubelet/kubelet_pods.go).
//
// NOTE(podsync): a port that keeps upstream's shape (its counts over init
// and regular containers and its decision cascade in upstream's order),
// so it is longer than this repository's 80-line bound.
func getPhase(pod *corev1.Pod, info []corev1.ContainerStatus, podIsTerminal, podHasInitialized bool) corev1.PodPhase {
	spec := pod.Spec
	pendingRestartableInit, pendingRegularInit, failedInit := 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if plan.IsRestartableInitContainer(c) {
			continue
		}
		st := findStatus(info, c.Name)
		switch {
		case st == nil:
			pendingRegularInit++
		case st.State.Running != nil:
			pendingRegularInit++
		case st.State.Terminated != nil:
			if st.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case st.State.Waiting != nil:
			if t := st.LastTerminationState.Terminated; t != nil {
				if t.ExitCode != 0 {
					failedInit++
				}
			} else {
				pendingRegularInit++
			}
		default:
			pendingRegularInit++
		}
	}
	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if !plan.IsRestartableInitContainer(c) {
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
		st := findStatus(info, spec.Containers[i].Name)
		switch {
		case st == nil:
			unknown++
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if st.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInit > 0 && spec.RestartPolicy == corev1.RestartPolicyNever {
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
		if spec.RestartPolicy == corev1.RestartPolicyAlways {
			return corev1.PodRunning
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		if spec.RestartPolicy == corev1.RestartPolicyNever {
			return corev1.PodFailed
		}
		return corev1.PodRunning
	default:
		return corev1.PodPending
	}
}
