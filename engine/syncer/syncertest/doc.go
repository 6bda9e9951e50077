// Package syncertest is the test harness of one Syncer on an
// enginetest.FakeRuntime with a fake clock: run passes, script container
// exits, and check steps, converged state and CRI calls. Test code only.
package syncertest
