package errorinfo_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/podsync/podsync/errorinfo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestReasonsAreDistinct: no two reasons share a spelling, so a client
// branching on one never takes another for it.
func TestReasonsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range []string{
		errorinfo.ReasonInvalidSpec, errorinfo.ReasonPodNotFound, errorinfo.ReasonContainerNotFound,
		errorinfo.ReasonPodAlreadyExists, errorinfo.ReasonUIDMismatch, errorinfo.ReasonSyncInProgress,
		errorinfo.ReasonPodTerminating, errorinfo.ReasonRuntimeUnavailable, errorinfo.ReasonShuttingDown,
		errorinfo.ReasonRevisionCompacted, errorinfo.ReasonFutureRevision, errorinfo.ReasonSlowConsumer,
		errorinfo.ReasonNoSpace, errorinfo.ReasonRateLimited, errorinfo.ReasonPermissionDenied,
		errorinfo.ReasonUnauthenticated, errorinfo.ReasonCanceled, errorinfo.ReasonDeadlineExceeded,
		errorinfo.ReasonInternal, errorinfo.ReasonUnexpectedAdmissionError,
		errorinfo.ReasonObjectNotFound, errorinfo.ReasonRevisionMismatch, errorinfo.ReasonOwnedByFile,
		errorinfo.ReasonLeaseSuperseded, errorinfo.ReasonLeaseRequired, errorinfo.ReasonLeaseHeld,
		errorinfo.ReasonContainerNotRunning, errorinfo.ReasonPodNotRunning, errorinfo.ReasonStreamFailed,
	} {
		if r == "" || seen[r] {
			t.Errorf("reason %q: empty or listed twice", r)
		}
		seen[r] = true
		if errorinfo.IsCapacityReason(r) {
			t.Errorf("%s is a capacity reason", r)
		}
	}
}

func TestIsCapacityReason(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   bool
	}{
		{"OutOfcpu", true},
		{"OutOfmemory", true},
		{"OutOfpods", true},
		{"OutOfephemeral-storage", true},
		{"NodePorts", false},
		{"PodSecurity", false},
		{"", false},
	} {
		if got := errorinfo.IsCapacityReason(tc.reason); got != tc.want {
			t.Errorf("IsCapacityReason(%q) = %v, want %v", tc.reason, got, tc.want)
		}
	}
}
