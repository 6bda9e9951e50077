// Package client is the Go SDK of podsyncd: typed methods over the
// podsync.v1 PodSyncService (api/podsync/v1, imported as podsyncv1) on a
// unix socket or mutual TLS over TCP, errors mapped to sentinels, retries
// of the calls that are safe to repeat, a watch that resumes, and helpers
// that build requests from core/v1 objects through the convert package.
//
// # Connecting
//
// New takes a target and options and returns a Client, which is safe for
// concurrent use; make one per process and Close it:
//
//	c, err := client.New(ctx, "")                 // unix:///run/podsync/podsync.sock
//	c, err := client.New(ctx, "/run/podsync/podsync.sock")
//	c, err := client.New(ctx, "node-1:7443",
//		client.WithTLSFiles("client.pem", "client-key.pem", "ca.pem"))
//	c, err := client.New(ctx, "127.0.0.1:7443", client.WithInsecure()) // --insecure-listen-loopback
//
// podsyncd knows a socket caller by its uid and a TCP caller by its client
// certificate. New refuses TCP without TLS, WithInsecure for a host other
// than loopback, and malformed targets; it does not dial unless given
// WithBlock, so a podsyncd that is not there shows as ErrUnavailable on
// the first call. NewFromConn wraps an existing connection, such as an
// in-process server's.
//
// # Running pods
//
// Manifests become requests through convert.ReadManifests, the reader
// podsyncctl uses (every problem of every file at once, with lines), and
// RunPodsRequestFromManifests, which defaults the objects as the
// Kubernetes API server would (a pod without a uid gets one derived from
// its namespace and name, so sending the same manifest again addresses
// the same pod) and runs podsyncd's checks before anything is sent:
//
//	m, notices, err := convert.ReadManifests([]convert.Source{{Name: "web.yaml", Data: data}}, convert.ReadOptions{})
//	req, err := client.RunPodsRequestFromManifests(m)
//	req.WaitFor = podsyncv1.WaitFor_WAIT_FOR_READY
//	res, err := c.RunPods(ctx, req, func(m *podsyncv1.RunPodsResponse) { … })
//	if err == nil && !res.OK() { … } // some pod was rejected, failed or timed out
//
// SyncPod applies one pod and streams its steps; PlanPod says what it
// would do; GetPod, ListPods and DeletePod are what they say; Logs streams
// a container's output. The RPCs' documentation in
// proto/podsync/v1/pod_sync_service.proto is the reference for what they
// do; each method here says what it adds.
//
// # Watching
//
// WatchPods is one WatchPods stream. Watch follows the pods across
// disconnects and podsyncd restarts: it resumes after the last revision it
// delivered and, when podsyncd no longer keeps that revision
// (REVISION_COMPACTED), lists the pods again, delivering their current
// statuses again and reporting the pods that went away meanwhile as
// deleted. It returns when ctx ends or its callback returns an error.
//
// # Timeouts and cancellation
//
// Every method takes a ctx, and its deadline or cancellation is the only
// timeout: the SDK sets none of its own, so give calls that can wait a
// deadline (RunPods waits for pods up to the request's timeout, 5 minutes
// by default; DeletePod for the grace period). A call that ends with its
// ctx returns an error matching ctx.Err() with errors.Is; work podsyncd
// has done stays done, and RunPods' pods keep running.
//
// Callbacks (RunPods' progress, SyncPod's onStep, the fn of WatchPods,
// Watch and Logs) run on the calling goroutine, in order; a slow callback
// slows the stream, and a WatchPods caller too slow for podsyncd's buffer
// gets ErrSlowConsumer (Watch resumes).
//
// # Retries
//
// WithRetry retries, on ErrUnavailable only, the calls that are safe to
// repeat: PlanPod, GetPod, ListPods, DeletePod, and SyncPod, WatchPods and
// Logs until their first message. RunPods is never retried. Without
// WithRetry nothing is retried, except that Watch always resumes.
//
// # Errors
//
// A failed call returns an *Error: the method, the pod, the gRPC code, the
// google.rpc.ErrorInfo reason and metadata, and the field violations of an
// INVALID_ARGUMENT. Its message reads "podsync: GetPod default/web: …"
// and status.FromError sees the original status. Branch on the sentinels
// with errors.Is, or on Reason, never on messages:
//
//	sentinel              code (reason)                                   when
//	ErrInvalidArgument    INVALID_ARGUMENT (INVALID_SPEC)                 malformed request; see FieldViolations. Nothing changed.
//	ErrNotFound           NOT_FOUND (POD_NOT_FOUND, CONTAINER_NOT_FOUND)  no such pod, container or previous instance
//	                      NOT_FOUND (OBJECT_NOT_FOUND)                    no such stored ConfigMap or Secret
//	ErrUIDMismatch        ABORTED (UID_MISMATCH)                          a precondition's uid names another incarnation; Metadata["uid"] is the live one (also ErrAborted)
//	                      ALREADY_EXISTS (POD_ALREADY_EXISTS)             SyncPod's or RunPods' explicit uid differs from the live pod's
//	ErrAlreadyExists      ALREADY_EXISTS                                  as above
//	ErrRejected           FAILED_PRECONDITION (NodePorts, Policy…)        admission refused a new pod in SyncPod; Reason says why
//	                      RESOURCE_EXHAUSTED (OutOfcpu, OutOfmemory, …)   … for lack of capacity (also ErrResourceExhausted)
//	ErrAborted            ABORTED (SYNC_IN_PROGRESS, POD_TERMINATING)     a sync is running, or the pod is being deleted; retry
//	ErrConflict           ABORTED (REVISION_MISMATCH)                     a revision precondition (IfRevision, IfNotExists, an object's resource_version)
//	                                                                      does not hold; nothing changed; read again (RetryOnConflict; also ErrAborted)
//	ErrLeaseSuperseded    FAILED_PRECONDITION (LEASE_SUPERSEDED)          the call's lease epoch is older than the node's lease: another control plane drives it
//	ErrLeaseRequired      FAILED_PRECONDITION (LEASE_REQUIRED)            podsyncd --require-lease and the call carries no current epoch (KeepLease)
//	ErrLeaseHeld          FAILED_PRECONDITION (LEASE_HELD)                AcquireLease while another identity holds the lease
//	ErrOwnedByFile        FAILED_PRECONDITION (OWNED_BY_FILE)             the pod or object belongs to a file of the manifest directory
//	ErrUnavailable        UNAVAILABLE (RUNTIME_UNAVAILABLE, …)            podsyncd or its runtime does not answer, or SHUTTING_DOWN; retry with back-off
//	ErrPermissionDenied   PERMISSION_DENIED                               the caller's role does not allow the call
//	ErrUnauthenticated    UNAUTHENTICATED                                 the caller has no identity podsyncd accepts
//	ErrRevisionCompacted  OUT_OF_RANGE (REVISION_COMPACTED)               WatchPods from a revision no longer kept; Metadata["compact_revision"]
//	ErrSlowConsumer       RESOURCE_EXHAUSTED (SLOW_CONSUMER)              a WatchPods caller fell behind; Metadata["revision"]
//	ErrResourceExhausted  RESOURCE_EXHAUSTED                              rate limit (RATE_LIMITED), too many streams (TOO_MANY_STREAMS), full disk (NO_SPACE), message too large, and the two above
//	ErrDeadlineExceeded   DEADLINE_EXCEEDED                               ctx's deadline passed (also context.DeadlineExceeded)
//	context.Canceled      CANCELLED                                       ctx was canceled
//
// RunPods reports admission refusals, failures and timeouts per pod in
// its result, not as errors. Errors without a sentinel (UNKNOWN or
// INTERNAL with reason INTERNAL, OUT_OF_RANGE with FUTURE_REVISION) are
// still *Error values with their code and reason.
//
// The reasons, their codes and the metadata keys are defined once, in
// package errorinfo, for podsyncd and the SDK alike; the Reason*
// constants here are the same values.
package client
