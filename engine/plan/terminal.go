package plan

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/validation"
)

// PodNotRunnable returns why the pod must only be stopped, if it must:
// then no container of it starts again.
func PodNotRunnable(pod *corev1.Pod, view *model.RuntimeView, now time.Time) (reason, message string) {
	switch {
	case pod.DeletionTimestamp != nil:
		return KillReasonPodDeleted, "Pod is being deleted"
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return KillReasonPodTerminal, fmt.Sprintf("Pod phase is %s", pod.Status.Phase)
	case ActiveDeadlineExceeded(pod, now):
		return KillReasonDeadlineExceeded, ActiveDeadlineMessage
	case BackoffLimitExceeded(pod, view):
		return KillReasonBackoffLimitExceeded, BackoffLimitMessage
	}
	return "", ""
}

// BackoffLimitMessage is the Job controller's message for a Job past its
// backoffLimit.
const BackoffLimitMessage = "Job has reached the specified backoff limit"

// BackoffLimitExceeded reports whether the pod's containers failed more
// often than its backoff limit (validation.AnnotationBackoffLimit)
// allows. It is the Job controller's rule for a Job of one pod, its pods
// retried in place: a Job with restartPolicy Never and backoffLimit N
// runs at most N+1 pods, so the pod fails at its (N+1)th failed run. A
// container's failed runs are its restarts (the pod restarts a container
// only after a failure, restartPolicy Always being refused with the
// annotation) and its newest instance, if that failed.
func BackoffLimitExceeded(pod *corev1.Pod, view *model.RuntimeView) bool {
	limit, ok := validation.BackoffLimit(pod)
	if !ok {
		return false
	}
	failed := int64(0)
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			inst := view.FindContainer(cs[i].Name)
			if inst == nil {
				continue
			}
			failed += int64(max(inst.RestartCount, 0))
			if inst.State != model.ContainerRunning && inst.State != model.ContainerCreated && isInitContainerFailed(inst) {
				failed++
			}
		}
	}
	return failed > int64(limit)
}

// ActiveDeadlineMessage is the kubelet's message for a pod past its
// activeDeadlineSeconds.
const ActiveDeadlineMessage = "Pod was active on the node longer than the specified deadline"

// ActiveDeadlineExceeded is the kubelet's activeDeadlineHandler.
func ActiveDeadlineExceeded(pod *corev1.Pod, now time.Time) bool {
	d := pod.Spec.ActiveDeadlineSeconds
	if d == nil || pod.Status.StartTime == nil {
		return false
	}
	return now.Sub(pod.Status.StartTime.Time) >= time.Duration(*d)*time.Second
}
