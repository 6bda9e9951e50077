// Package robustness checks podsyncd's contract with remote control
// planes from a recorded history, under faults, as etcd's robustness
// tests do: several clients issue conditional and unconditional SyncPod,
// DeletePod, GetPod, ApplyObjects and GetObject calls with random specs
// against podsyncd on a private containerd (internal/testing/localcri),
// while podsyncd is killed with SIGKILL and restarted, its store's commits
// are delayed (the store-commit failpoint) and the clients' connections
// are cut in the middle of calls. Calls whose outcome is unknown are
// recorded as such, with the time podsyncd's log says they finished (or
// the kill that ended them). The history is checked with
// github.com/anishathalye/porcupine against a model of the pods and
// objects (a register per key, with revisions and preconditions); a
// history porcupine refuses is saved as its HTML visualization.
//
// The same run checks that WatchPods delivers every change in revision
// order exactly once across reconnects, and that a stale lease holder's
// write, sent after another acquisition, never lands.
//
// The tests build with -tags robustness and need root:
//
//	flock /tmp/podsync-integration.lock go test -tags robustness -race -count=1 -v ./test/robustness
//
// PODSYNC_ROBUSTNESS_DURATION (default 2m15s) is how long the faulted
// load runs; PODSYNC_ROBUSTNESS_SEED replays a logged seed;
// PODSYNC_ROBUSTNESS_ARTIFACTS is where a refused history's HTML goes
// (default the test's log directory, .tmp/logs/robustness).
// TestSkippedPreconditionsAreCaught runs podsyncd with the
// skip-preconditions failpoint armed and must find a violation: the
// checker can fail.
package robustness
