package logx

import (
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
)

// Log keys of the engine and the server (STYLE.md: snake_case, one file).
const (
	PodNamespace  = "pod_namespace"
	PodName       = "pod_name"
	PodUID        = "pod_uid"
	SandboxID     = "sandbox_id"
	Attempt       = "attempt"
	ContainerName = "container_name"
	ContainerID   = "container_id"
	RestartCount  = "restart_count"
	Duration      = "duration"
	Action        = "action"
	Reason        = "reason"
	Image         = "image"
	NextRetry     = "next_retry"
	Phase         = "phase"
	PrevPhase     = "previous_phase"
	State         = "state"
	PrevState     = "previous_state"
	Stage         = "stage"
	Generation    = "generation"
	Revision      = "revision"
	Adopted       = "adopted"
	Deleting      = "deleting"
	Pods          = "pods"
	Path          = "path"
	Size          = "size"
	Lost          = "lost"
	Signal        = "signal"
	UsedBytes     = "used_bytes"
	Volume        = "volume"
	// Object is a stored ConfigMap or Secret ("ConfigMap ns/name"),
	// ResourceVersion its version; Source a manifest file ("file:NAME").
	Object          = "object"
	ResourceVersion = "resource_version"
	Source          = "source"
	HintSource      = "hint_source"
	// StatsCollectPeriod is the container runtime's background stats
	// period (containerd 2.x's CRI stats_collect_period).
	StatsCollectPeriod = "stats_collect_period"
)

// Keys of a request's scope, set by the server's interceptors and carried
// to the engine in the context (WithFields).
const (
	RPCMethod = "rpc_method"
	RequestID = "request_id"
	// TraceID is the W3C trace id of a call's trace (the caller's, when
	// it sent a traceparent): a log line's link to its spans.
	TraceID  = "trace_id"
	Identity = "identity"
	Role     = "role"
	// The server's line per call adds these.
	GRPCCode      = "grpc_code"
	Error         = "error"
	PeerAddress   = "peer_address"
	Deadline      = "deadline"
	RemoteAddress = "remote_address"
	// mTLS certificates (the TLS reloader, revoked clients).
	Serial   = "serial"
	Subject  = "subject"
	Issuer   = "issuer"
	NotAfter = "not_after"
)

// Pod returns the fields that name pod in every log line about it.
func Pod(pod *corev1.Pod) []zap.Field {
	return []zap.Field{
		zap.String(PodNamespace, pod.Namespace),
		zap.String(PodName, pod.Name),
		zap.String(PodUID, string(pod.UID)),
	}
}
