//go:build integration

// Package faults crashes and starves podsyncd and checks that it
// recovers: podsyncd built with -tags failpoints (engine/failpoint) runs
// as a child process against a private containerd (internal/testing/localcri):
// PODSYNC_CONTAINERD=2 (default) or 1.6. Each crash test arms one
// failpoint (or kills podsyncd with SIGKILL at a random moment), lets it
// die in the middle of a batch, restarts it unarmed on the same root
// directory, issues the same request again and checks the runtime with CRI
// and crictl: every pod runs, with one ready sandbox, nothing unlabelled or
// left for the garbage collector, restart counts continued, and the store
// and the runtime agree. Runtime faults (containerd stopped, hung, a full
// disk) are here too.
//
// PODSYNC_SOAK=1 (make soak) runs many more random kills;
// PODSYNC_FAULTS_SEED replays the random kills of a logged seed.
//
// The tests run one at a time: podsyncd removes podsync's pods its store
// does not hold, which includes another test's.
package faults
