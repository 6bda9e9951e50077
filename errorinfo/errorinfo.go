package errorinfo

import "strings"

// Domain is the domain of every google.rpc.ErrorInfo podsyncd sends.
const Domain = "podsync.io"

// Reasons of google.rpc.ErrorInfo, with the gRPC code each comes with.
// Clients branch on these, never on a status message.
const (
	// ReasonInvalidSpec (INVALID_ARGUMENT): the request is malformed; a
	// google.rpc.BadRequest lists the field violations, and metadata
	// MetadataViolations counts them.
	ReasonInvalidSpec = "INVALID_SPEC"
	// ReasonPodNotFound (NOT_FOUND): podsyncd has no such pod.
	ReasonPodNotFound = "POD_NOT_FOUND"
	// ReasonContainerNotFound (NOT_FOUND): the pod has no such container,
	// or no previous instance of it; metadata MetadataContainer.
	ReasonContainerNotFound = "CONTAINER_NOT_FOUND"
	// ReasonPodAlreadyExists (ALREADY_EXISTS): a pod of the same
	// namespace/name exists with another uid.
	ReasonPodAlreadyExists = "POD_ALREADY_EXISTS"
	// ReasonUIDMismatch (ABORTED): a precondition's uid (or DeletePod's
	// uid) names another incarnation of the pod, or a pod that does not
	// exist; metadata MetadataUID is the live pod's (absent when there is
	// none) and MetadataRevision its revision ("0" when there is none).
	// Nothing was changed.
	ReasonUIDMismatch = "UID_MISMATCH"
	// ReasonRevisionMismatch (ABORTED): a precondition's revision (an
	// object's resource_version) is not the current one of the pod or
	// object (0 when it does not exist); metadata MetadataRevision is the
	// current one and, for a pod, MetadataUID its uid. Nothing was
	// changed: read again and retry.
	ReasonRevisionMismatch = "REVISION_MISMATCH"
	// ReasonLeaseSuperseded (FAILED_PRECONDITION): a mutating call carries
	// a lease epoch older than the node's lease, or a lease call names an
	// epoch that is not the current one or is held by another identity;
	// metadata MetadataEpoch and MetadataHolder are the current lease's.
	// Nothing was changed: this caller is no longer the node's driver.
	ReasonLeaseSuperseded = "LEASE_SUPERSEDED"
	// ReasonLeaseRequired (FAILED_PRECONDITION): podsyncd runs with
	// --require-lease and a mutating call carries no epoch, or an epoch of
	// no held lease (released, or never granted); metadata MetadataEpoch
	// and MetadataHolder are the current lease's. Acquire the lease first.
	ReasonLeaseRequired = "LEASE_REQUIRED"
	// ReasonLeaseHeld (FAILED_PRECONDITION): AcquireLease while another
	// identity holds an unexpired lease; metadata MetadataHolder,
	// MetadataEpoch and MetadataExpireTime. Retry after it expires.
	ReasonLeaseHeld = "LEASE_HELD"
	// ReasonSyncInProgress (ABORTED): a sync is already running for the
	// pod. Retry.
	ReasonSyncInProgress = "SYNC_IN_PROGRESS"
	// ReasonPodTerminating (ABORTED): the pod is being deleted.
	ReasonPodTerminating = "POD_TERMINATING"
	// ReasonRuntimeUnavailable (UNAVAILABLE): the CRI runtime did not
	// answer. Retry with back-off.
	ReasonRuntimeUnavailable = "RUNTIME_UNAVAILABLE"
	// ReasonShuttingDown (UNAVAILABLE): podsyncd is shutting down. Retry
	// once it is back.
	ReasonShuttingDown = "SHUTTING_DOWN"
	// ReasonRevisionCompacted (OUT_OF_RANGE): WatchPods' since_revision is
	// older than the history kept; metadata MetadataCompactRevision.
	ReasonRevisionCompacted = "REVISION_COMPACTED"
	// ReasonFutureRevision (OUT_OF_RANGE): WatchPods' since_revision is
	// newer than podsyncd's store.
	ReasonFutureRevision = "FUTURE_REVISION"
	// ReasonSlowConsumer (RESOURCE_EXHAUSTED): a WatchPods caller fell too
	// far behind; metadata MetadataRevision is the last revision sent.
	ReasonSlowConsumer = "SLOW_CONSUMER"
	// ReasonNoSpace (RESOURCE_EXHAUSTED): a write of podsyncd's (its
	// store, a pod's files) failed because the file system is full
	// (ENOSPC); the message names the file. Retry once space is freed.
	ReasonNoSpace = "NO_SPACE"
	// ReasonRateLimited (RESOURCE_EXHAUSTED): the caller's identity made
	// more mutating calls, or more read calls, than its rate limit allows
	// (one bucket each); metadata MetadataIdentity and
	// MetadataRetryAfterMillis. Retry after a back-off.
	ReasonRateLimited = "RATE_LIMITED"
	// ReasonTooManyStreams (RESOURCE_EXHAUSTED): the caller's identity
	// holds as many long-lived streams open (WatchPods, GetContainerLogs)
	// as it may; metadata MetadataIdentity. Close one, then retry.
	ReasonTooManyStreams = "TOO_MANY_STREAMS"
	// ReasonPermissionDenied (PERMISSION_DENIED): the caller's identity
	// has no role, or its role may not call the method; metadata
	// MetadataMethod and MetadataIdentity.
	ReasonPermissionDenied = "PERMISSION_DENIED"
	// ReasonUnauthenticated (UNAUTHENTICATED): the caller presented no
	// identity at all (a plaintext loopback connection) and the roles
	// grant "anonymous" nothing; metadata MetadataMethod and
	// MetadataIdentity.
	ReasonUnauthenticated = "UNAUTHENTICATED"
	// ReasonCanceled (CANCELLED): the caller canceled.
	ReasonCanceled = "CANCELED"
	// ReasonDeadlineExceeded (DEADLINE_EXCEEDED): the caller's deadline
	// passed.
	ReasonDeadlineExceeded = "DEADLINE_EXCEEDED"
	// ReasonInternal (UNKNOWN, or INTERNAL for a panic): an error podsyncd
	// did not classify. Its details are in podsyncd's log only.
	ReasonInternal = "INTERNAL"
	// ReasonUnexpectedAdmissionError (FAILED_PRECONDITION): admission
	// refused a pod without saying why, the kubelet's name for it. The
	// other admission reasons are the engine's (see the package
	// documentation).
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
	// ReasonVolumeInUse (FAILED_PRECONDITION): DeleteVolume of a named
	// volume a stored pod names; delete the pods first.
	ReasonVolumeInUse = "VOLUME_IN_USE"
	// ReasonObjectNotFound (NOT_FOUND): podsyncd stores no such ConfigMap
	// or Secret.
	ReasonObjectNotFound = "OBJECT_NOT_FOUND"
	// ReasonOwnedByFile (FAILED_PRECONDITION): the pod or object was read
	// from a file of podsyncd's manifest directory, which owns it: change
	// or remove the file.
	ReasonOwnedByFile = "OWNED_BY_FILE"
	// ReasonContainerNotRunning (FAILED_PRECONDITION): exec or attach
	// named a container whose newest instance is not running; metadata
	// MetadataContainer. Retry once it runs.
	ReasonContainerNotRunning = "CONTAINER_NOT_RUNNING"
	// ReasonPodNotRunning (FAILED_PRECONDITION): port-forward named a pod
	// without a ready sandbox. Retry once it runs.
	ReasonPodNotRunning = "POD_NOT_RUNNING"
	// ReasonStreamFailed (UNAVAILABLE): the runtime's streaming server
	// failed an exec, attach or port-forward session after it started (a
	// port-forward to a port nothing listens on, say); the message is the
	// runtime's.
	ReasonStreamFailed = "STREAM_FAILED"
)

// Keys of ErrorInfo metadata.
const (
	// MetadataCompactRevision is the oldest revision WatchPods can resume
	// after (REVISION_COMPACTED).
	MetadataCompactRevision = "compact_revision"
	// MetadataRevision is the last revision sent on a stream
	// (SLOW_CONSUMER), or the current revision of a pod or object
	// (REVISION_MISMATCH, UID_MISMATCH), "0" when it does not exist.
	MetadataRevision = "revision"
	// MetadataEpoch is the epoch of the node's lease (LEASE_SUPERSEDED,
	// LEASE_REQUIRED, LEASE_HELD).
	MetadataEpoch = "epoch"
	// MetadataHolder is the identity holding the node's lease, empty when
	// nobody does (LEASE_SUPERSEDED, LEASE_REQUIRED, LEASE_HELD).
	MetadataHolder = "holder"
	// MetadataExpireTime is when the node's lease expires, RFC 3339
	// (LEASE_HELD).
	MetadataExpireTime = "expire_time"
	// MetadataViolations is the number of field violations
	// (INVALID_SPEC).
	MetadataViolations = "violations"
	// MetadataUID is the uid of the live pod (UID_MISMATCH,
	// REVISION_MISMATCH).
	MetadataUID = "uid"
	// MetadataContainer is the container asked for (CONTAINER_NOT_FOUND).
	MetadataContainer = "container"
	// MetadataIdentity is the caller's identity (PERMISSION_DENIED,
	// UNAUTHENTICATED, RATE_LIMITED).
	MetadataIdentity = "identity"
	// MetadataMethod is the full gRPC method refused (PERMISSION_DENIED,
	// UNAUTHENTICATED).
	MetadataMethod = "method"
	// MetadataRetryAfterMillis is how long to wait before the call can
	// succeed, in milliseconds (RATE_LIMITED).
	MetadataRetryAfterMillis = "retry_after_ms"
)

// capacityPrefix starts the kubelet's capacity reasons, "OutOf<resource>".
const capacityPrefix = "OutOf"

// IsCapacityReason reports whether an admission reason is a lack of
// capacity: the kubelet's "OutOf<resource>" (OutOfcpu, OutOfmemory,
// OutOfpods, OutOfephemeral-storage, …). Those come with
// RESOURCE_EXHAUSTED, the other admission reasons with
// FAILED_PRECONDITION.
func IsCapacityReason(reason string) bool {
	return strings.HasPrefix(reason, capacityPrefix)
}
