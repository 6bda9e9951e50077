package model

import "fmt"

// ProbeResult is the last result of a probe of one container instance.
type ProbeResult int

// Probe results. ProbeUnknown means the probe has not run (or the
// container has no such probe).
const (
	ProbeUnknown ProbeResult = iota
	ProbeSuccess
	ProbeFailure
)

// String returns "Unknown", "Success" or "Failure".
func (r ProbeResult) String() string {
	switch r {
	case ProbeUnknown:
		return "Unknown"
	case ProbeSuccess:
		return "Success"
	case ProbeFailure:
		return "Failure"
	default:
		return fmt.Sprintf("Result(%d)", int(r))
	}
}

// ProbeResults holds the prober's last results, by container ID. Nil maps
// are empty.
type ProbeResults struct {
	Liveness  map[string]ProbeResult
	Readiness map[string]ProbeResult
	Startup   map[string]ProbeResult
}
