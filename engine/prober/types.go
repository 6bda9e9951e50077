package prober

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/model"
)

// Type is the kind of a probe: liveness, readiness or startup.
type Type int

// Probe types.
const (
	Liveness Type = iota + 1
	Readiness
	Startup
)

// allTypes lists the probe types in the order workers are started and
// stopped.
var allTypes = [...]Type{Liveness, Readiness, Startup}

// String returns the name of t as the kubelet writes it in events
// ("Liveness", "Readiness", "Startup").
func (t Type) String() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	default:
		return fmt.Sprintf("Type(%d)", int(t))
	}
}

// index is t's position in per-type arrays.
func (t Type) index() int { return int(t) - 1 }

// Result is the current result of one probe of one container instance:
// the planner's plan.ProbeResult, so that the prober's results reach the
// planner as they are (Unknown: the probe has not decided yet, a startup
// probe before it has passed or failed its threshold; Success: it passed
// SuccessThreshold times in a row, or, for liveness, has not run yet;
// Failure: it failed FailureThreshold times in a row, or, for readiness,
// has not passed yet).
type Result = model.ProbeResult

// Probe results.
const (
	Unknown = model.ProbeUnknown
	Success = model.ProbeSuccess
	Failure = model.ProbeFailure
)

// initialResult is what a probe's result is taken to be before the probe
// has decided (the kubelet's worker initialValue): a container is not
// ready until a readiness probe passes, is never killed over a liveness
// probe that has not run, and has not started until its startup probe
// passes.
func initialResult(t Type) Result {
	switch t {
	case Readiness:
		return Failure
	case Liveness:
		return Success
	default:
		return Unknown
	}
}

// Results are a pod's current probe results by container instance id,
// the planner's plan.ProbeResults.
type Results = model.ProbeResults

// Update reports that one probe's result changed.
type Update struct {
	PodUID        types.UID
	ContainerName string
	ContainerID   string
	Type          Type
	Result        Result
	// Output is what the probe that decided Result reported: the exec
	// command's output, the HTTP status or the dial error. It is meant
	// for events and logs ("Liveness probe failed: …"), not for parsing.
	Output string
}

// The kubelet's event reasons of probe runs (pkg/kubelet/events).
const (
	// EventUnhealthy: a probe failed, or errored.
	EventUnhealthy = "Unhealthy"
	// EventProbeWarning: a probe passed with a warning (an HTTP redirect
	// to another host).
	EventProbeWarning = "ProbeWarning"
)

// Event is what the kubelet's prober records for one probe run that did
// not pass cleanly: every failure, error and warning, whether or not it
// changes the result (the recorder counts the repeats). Its type is
// always Warning.
type Event struct {
	PodUID        types.UID
	ContainerName string
	// Reason is EventUnhealthy or EventProbeWarning.
	Reason string
	// Message is the kubelet's: "Readiness probe failed: <output>",
	// "Liveness probe errored and resulted in unknown state: <error>",
	// "Readiness probe warning: <output>".
	Message string
}

// RunningContainer is one running container instance of a pod, as the
// caller last saw it in the runtime.
type RunningContainer struct {
	// Name is the container's name in the pod spec (a container or a
	// restartable init container). Required.
	Name string
	// ID is the runtime's container ID. Required; a new ID is a new
	// instance with fresh probe state.
	ID string
	// StartedAt is when the instance started; initialDelaySeconds counts
	// from it. Required.
	StartedAt time.Time
	// PodIP is the address tcpSocket and httpGet probes dial unless they
	// name a host. Host-network pods use Options.NodeIP instead, when it
	// is set. Mutable: a later Sync may change it.
	PodIP string
}

// ExecRunner runs a command in a container and waits for it, as CRI
// ExecSync. k8s.io/cri-api's RuntimeService satisfies it.
type ExecRunner interface {
	// ExecSync runs cmd in the container with the given timeout. A command
	// that exits non-zero returns an error that k8s.io/utils/exec's
	// ExitError matches (errors.As) with its exit code, as cri-client's
	// CodeExitError. A command that ran past timeout returns an error for
	// which Options.IsExecTimeout reports true.
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}
