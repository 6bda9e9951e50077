package enginetest

import "testing"

// ConformanceRow is one behaviour RuntimeConformance checks.
type ConformanceRow struct {
	// Name names the subtest.
	Name string
	// RealOnly marks a row a TestDouble cannot honour; Reason says why.
	RealOnly bool
	// Reason explains RealOnly.
	Reason string
	// Run checks the behaviour; the runtime is fresh for a double and shared
	// for a real runtime, so rows clean up what they create.
	Run func(t *testing.T, h *Harness)
}

// TermScript runs until SIGTERM and then exits 0 at once.
const TermScript = `trap "exit 0" TERM; while :; do sleep 1 & wait; done`

// RuntimeConformance runs every conformance row against runtimes made by
// newRuntime: on a TestDouble the RealOnly rows are left out (and named in
// the test log). newRuntime may return a fresh runtime per call (a double)
// or the same connection to a shared real runtime.
func RuntimeConformance(t *testing.T, newRuntime func(t *testing.T) Runtime) {
	t.Helper()
	double := false
	if d, ok := newRuntime(t).(TestDouble); ok && d.IsTestDouble() {
		double = true
	}
	for _, row := range conformanceRows {
		if row.RealOnly && double {
			t.Logf("row %q needs a real runtime: %s", row.Name, row.Reason)
			continue
		}
		t.Run(row.Name, func(t *testing.T) {
			h := NewHarness(t, newRuntime(t))
			h.EnsureImage(ConformanceImage)
			row.Run(t, h)
		})
	}
}

// conformanceRows run in this order. Their functions live by concern in
// conformance_containers.go, conformance_sandboxes.go,
// conformance_metadata.go (labels, ids, names, list filters),
// conformance_events.go and conformance_images.go.
var conformanceRows = []ConformanceRow{
	{Name: "sandbox gets a pod IP from CNI", Run: testSandboxIP},
	{Name: "container exits with its exit code", Run: testExitCode},
	{Name: "a container reports its stop signal, or none", Run: testStopSignal},
	{Name: "container logs are written in CRI format to the log path", Run: testLogs},
	{Name: "StopContainer lets a container handle SIGTERM", Run: testStopGraceful},
	{Name: "StopContainer kills a PID 1 without a SIGTERM handler after the grace period", Run: testStopKill},
	{Name: "StopContainer ends a process that is not PID 1 with SIGTERM", Run: testStopTerm},
	{Name: "StopContainer kills a container that ignores SIGTERM", Run: testStopIgnored},
	{Name: "labels and annotations round-trip", Run: testLabels},
	{Name: "stopping a sandbox stops its containers", Run: testStopSandbox},
	{Name: "removing a sandbox removes its containers", Run: testRemoveSandbox},
	{Name: "a stopped sandbox takes no new container and starts none", Run: testNoStartInStoppedSandbox},
	{Name: "unknown ids are NotFound for status, fine for remove", Run: testUnknownIDs},
	{Name: "list filters by label, state, sandbox and id", Run: testListFilters},
	{Name: "names are reserved while their sandbox or container exists", Run: testNameReservation},
	{Name: "a restarted container is a new attempt beside the old one", Run: testAttempts},
	{Name: "container events stream, or Unimplemented", Run: testEvents},
	{Name: "images are pulled and reported", Run: testImages},
	{Name: "ExecSync returns output and exit code", Run: testExecSync},
	{
		Name:     "containers share the pod network namespace",
		RealOnly: true,
		Reason:   "a test double runs no processes and has no network namespaces",
		Run:      testSharedNetwork,
	},
}
