// Package prober runs the liveness, readiness and startup probes of running
// containers, with the kubelet's semantics (pkg/kubelet/prober, v1.37), and
// keeps their results for the pod workers, which feed them to the planner
// (liveness and startup failures restart a container) and to the status
// (Ready).
//
// The package does not import the engine: its Result has the values of the
// engine's ProbeResult, in the same order, and the pod workers map one to
// the other.
//
// # Workers
//
// A Manager keeps one worker goroutine per pod, container and probe type,
// bound to one container instance (the kubelet's container-bound worker).
// The caller tells it what runs with Sync(pod, running), whenever it has
// looked at the runtime; Sync starts workers for new instances and stops
// those of instances that no longer run. A restarted container has a new ID
// and so new workers with fresh state: its thresholds count from zero and
// its results start again from their initial values. A container without a
// probe of some type has no worker of that type (a container without a
// readiness probe is ready when it runs, which the status decides, not the
// prober). Restartable init containers (sidecars) are probed as containers.
//
// # Results
//
// Results(podUID) returns the current result of each probe of each tracked
// instance, keyed by container ID. Before a probe has decided, its result
// is its initial value: liveness Success (a probe that has not run never
// kills a container), readiness Failure (not ready until proven ready,
// which also holds after a restart of podsync: readiness is not carried
// over) and startup Unknown.
//
// A probe's result changes only when the probe returns the other outcome
// successThreshold (success) or failureThreshold (failure) times in a row.
// Each change is sent on Updates, after Results shows it; the pod workers
// wake their pod on it. A probe that returns the current result again sends
// nothing. Sync's own changes (new instances and their initial values) are
// not sent: Sync's caller sees them in Results.
//
// # Timing
//
// A worker probes first when the container has run initialDelaySeconds
// (from RunningContainer.StartedAt), or at once if it has already. For a
// container that was running before the Manager was created, adopted from
// an earlier podsync, a random part of one period is added, so that a
// restart of podsync does not probe every container at the same moment.
// Then the worker probes every periodSeconds, as a ticker: a probe that
// overruns a period skips that period. Each probe has timeoutSeconds. Zero
// fields take the API's defaults (period 10 s, timeout 1 s, success
// threshold 1, failure threshold 3).
//
// # Startup, liveness and failures
//
// A container with a startup probe runs only that probe until it passes;
// then its readiness and liveness workers start, and the startup worker
// ends: a passed startup probe is never run again for that instance. A
// startup probe that fails failureThreshold times is Failure, and its
// worker ends too.
//
// A liveness or startup Failure is final for the instance: the container
// must be restarted, so the worker stops probing (the kubelet puts it on
// hold to avoid exec'ing into a container being killed) and the result
// stays Failure until Sync sees the container with another ID, or not at
// all. A readiness probe runs as long as its container.
//
// A probe error (a named port that does not exist, no pod IP, an ExecSync
// that fails for another reason than the command's exit or timeout) is not
// a result. The probe is tried up to three times, then the error is logged
// and thrown away, and the result stays as it was, as in the kubelet.
//
// # Probe handlers
//
//   - exec runs the command (with $(VAR) references to the container's
//     literal env values expanded) through the runtime's ExecSync with the
//     probe's timeout. Exit status 0 is success, any other status failure,
//     and a command that ran past its timeout is failure (see
//     Options.IsExecTimeout). At most 10 KiB of stdout and stderr are kept
//     as the output.
//   - tcpSocket connects to host:port, host being the probe's host or the
//     pod's address. A connection within the timeout is success.
//   - httpGet sends GET scheme://host:port/path, with the probe's headers
//     (a Host header sets the request's host), User-Agent kube-probe/1.37
//     and Accept */* unless the probe sets them. A status from 200 to 399
//     is success, any other status or error failure. Redirects are followed
//     to the same host name only, up to 10; a redirect to another host is
//     not followed and counts as success, with a warning. At most 10 KiB of
//     the body is read. TLS certificates are not verified and no proxy is
//     used, as in the kubelet.
//   - grpc calls grpc.health.v1.Health/Check with the probe's service on
//     the pod's address and the probe's port (plaintext, or TLS without
//     verification with mode TLS), as the kubelet's pkg/probe/grpc:
//     SERVING is success; another status, a server without the health
//     service or no connection within the timeout is failure, with the
//     kubelet's message (service unhealthy (responded with "NOT_SERVING")),
//     never an error.
//
// Ports are numbers or names of the container's ports (a number for
// grpc). The pod's address is RunningContainer.PodIP, or Options.NodeIP
// for host-network pods.
//
// # Shutdown
//
// Stop cancels every worker, aborting the probes in flight, waits for all
// goroutines and closes Updates.
package prober
