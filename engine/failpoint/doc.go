// Package failpoint lets tests stop podsyncd dead, or stall it, at named
// points of its work, to check that what it leaves behind is recovered
// (test/integration/faults).
//
// Failpoints are compiled in only under the build tag failpoints:
//
//	go build -tags failpoints ./cmd/podsyncd
//
// Without the tag Inject is an empty function the compiler inlines away,
// and the environment is never read. With it, the points named in the
// environment variable PODSYNC_FAILPOINTS (EnvVar) are armed when the
// process starts:
//
//	PODSYNC_FAILPOINTS='after-sandbox-created=exit@8;before-image-pull=sleep(2s)'
//
// The variable is a list of name=action[@N], separated by ';'. Names are
// the constants of this package (Points lists them). Actions:
//
//   - exit: the process dies at once by SIGKILL, as with kill -9: no
//     deferred function runs, no file is closed or synced;
//   - exit(D): the caller goes on, and the process dies by SIGKILL D (a
//     time.Duration) later, in the middle of whatever follows: "exit(20ms)"
//     after CreateContainer kills podsyncd while StartContainer is in
//     flight;
//   - sleep(D): the calling goroutine sleeps for D (a time.Duration);
//   - hang: the calling goroutine blocks until the process ends;
//   - off: the check the point guards is skipped (Skip reports true; for
//     points that guard a check, such as skip-preconditions).
//
// With @N the action runs on the N-th hit of the point only (counting
// from 1, across goroutines); without it, on every hit. Before it acts, a
// point that fires writes "podsync failpoint NAME fired …" to stderr, so
// a test can tell a failpoint's death from another. An invalid
// PODSYNC_FAILPOINTS makes the process exit with status 2 at start.
//
// A failpoint call is one line at the place it names:
//
//	failpoint.Inject(failpoint.AfterSandboxCreated)
package failpoint
