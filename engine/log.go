package engine

import (
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
)

// Log keys of the engine (STYLE.md: snake_case, one file).
const (
	logPodNamespace  = "pod_namespace"
	logPodName       = "pod_name"
	logPodUID        = "pod_uid"
	logSandboxID     = "sandbox_id"
	logAttempt       = "attempt"
	logContainerName = "container_name"
	logContainerID   = "container_id"
	logRestartCount  = "restart_count"
	logDuration      = "duration"
	logAction        = "action"
	logReason        = "reason"
	logImage         = "image"
	logNextRetry     = "next_retry"
	logPhase         = "phase"
	logPrevPhase     = "previous_phase"
	logGeneration    = "generation"
	logRevision      = "revision"
	logAdopted       = "adopted"
	logDeleting      = "deleting"
	logPods          = "pods"
	logPath          = "path"
	logSize          = "size"
)

// podFields are the fields that name pod in every log line about it.
func podFields(pod *corev1.Pod) []zap.Field {
	return []zap.Field{
		zap.String(logPodNamespace, pod.Namespace),
		zap.String(logPodName, pod.Name),
		zap.String(logPodUID, string(pod.UID)),
	}
}

// stepFields are the fields of one step's log line.
func stepFields(st StepResult) []zap.Field {
	f := []zap.Field{zap.String(logAction, string(st.Action))}
	if st.ContainerName() != "" {
		f = append(f, zap.String(logContainerName, st.ContainerName()))
	}
	if st.ContainerID != "" {
		f = append(f, zap.String(logContainerID, st.ContainerID))
	}
	if st.SandboxID != "" {
		f = append(f, zap.String(logSandboxID, st.SandboxID))
	}
	if st.ContainerType != "" {
		f = append(f, zap.Uint32(logRestartCount, st.Attempt))
	} else if st.SandboxID != "" {
		f = append(f, zap.Uint32(logAttempt, st.Attempt))
	}
	if st.Reason != "" {
		f = append(f, zap.String(logReason, st.Reason))
	}
	if !st.NextRetry.IsZero() {
		f = append(f, zap.Time(logNextRetry, st.NextRetry))
	}
	return append(f, zap.Duration(logDuration, st.Duration.Round(time.Millisecond)))
}
