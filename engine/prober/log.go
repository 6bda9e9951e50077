package prober

// Log keys of the prober (STYLE.md: snake_case, one file; the pod and
// container keys are the engine's).
const (
	logPodNamespace  = "pod_namespace"
	logPodName       = "pod_name"
	logPodUID        = "pod_uid"
	logContainerName = "container_name"
	logContainerID   = "container_id"
	logProbeType     = "probe_type"
	logResult        = "probe_result"
	logOutput        = "output"
	logPanic         = "panic"
)
