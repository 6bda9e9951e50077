"""podsync_client: the podsync.v1 API from Python.

The generated code (gen/, made by `make clients` with buf, protoc and the
gRPC Python plugin) is the API; this module adds what every caller needs
beside it: a channel to podsyncd's unix socket or mTLS listener, the
google.rpc.ErrorInfo of an error (callers branch on its reason, never on
the message), and WatchPods that resumes after a break without a gap or a
duplicate.
"""

import os
import sys
import time

_GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen")
if _GEN not in sys.path:
    sys.path.insert(0, _GEN)

import grpc  # noqa: E402
from google.rpc import error_details_pb2, status_pb2  # noqa: E402
from podsync.v1 import pod_sync_service_pb2 as pb  # noqa: E402
from podsync.v1 import pod_sync_service_pb2_grpc as pb_grpc  # noqa: E402

# DOMAIN is the ErrorInfo domain of podsync's errors.
DOMAIN = "podsync.io"

# Reasons a caller branches on (errorinfo/errorinfo.go has them all).
REVISION_COMPACTED = "REVISION_COMPACTED"
SLOW_CONSUMER = "SLOW_CONSUMER"
SHUTTING_DOWN = "SHUTTING_DOWN"
RUNTIME_UNAVAILABLE = "RUNTIME_UNAVAILABLE"
POD_NOT_FOUND = "POD_NOT_FOUND"
INVALID_SPEC = "INVALID_SPEC"


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def connect(target, ca=None, cert=None, key=None):
    """Returns a PodSyncService stub over a new channel to target.

    target is "unix:///run/podsync/podsync.sock" (podsyncd knows the caller
    by its uid) or "host:port" with ca, cert and key, the PEM files of the
    CA that signed podsyncd's certificate and of the client's own (mTLS).
    """
    if ca:
        creds = grpc.ssl_channel_credentials(
            root_certificates=_read(ca), private_key=_read(key), certificate_chain=_read(cert))
        channel = grpc.secure_channel(target, creds)
    else:
        channel = grpc.insecure_channel(target)
    return pb_grpc.PodSyncServiceStub(channel), channel


def error_info(err):
    """Returns the podsync ErrorInfo of a grpc.RpcError, or None."""
    for key, value in err.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        st = status_pb2.Status.FromString(value)
        for detail in st.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Is(info.DESCRIPTOR) and detail.Unpack(info) and info.domain == DOMAIN:
                return info
    return None


def reason(err):
    """Returns the ErrorInfo reason of a grpc.RpcError, or ""."""
    info = error_info(err)
    return info.reason if info else ""


def field_violations(err):
    """Returns {field: description} of an INVALID_ARGUMENT's BadRequest."""
    out = {}
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                br = error_details_pb2.BadRequest()
                if detail.Is(br.DESCRIPTOR) and detail.Unpack(br):
                    out.update({v.field: v.description for v in br.field_violations})
    return out


class WatchBroken(Exception):
    """Raised by watch_pods when podsyncd stayed away longer than retry_for."""


def watch_pods(stub, since_revision=0, namespace="", retry_for=60.0, on_break=None):
    """Yields the WatchPodsResponse messages of WatchPods, resuming after breaks.

    With since_revision 0 it starts with the current pods and a synced
    message, as WatchPods does. When the stream breaks — podsyncd restarts
    (UNAVAILABLE, SHUTTING_DOWN or RUNTIME_UNAVAILABLE) or found the caller
    too slow (SLOW_CONSUMER) — it watches again from the last revision it
    yielded after synced, so every change is yielded once and in order; a
    break before synced lists again. on_break(err, revision) is called at
    each break. It raises the RpcError of any other error, REVISION_COMPACTED
    (list again) included, and WatchBroken when podsyncd stayed away longer
    than retry_for seconds.
    """
    revision = since_revision
    synced = since_revision != 0
    down_since = None
    delay = 0.1
    while True:
        try:
            request = pb.WatchPodsRequest(since_revision=revision, namespace=namespace)
            for msg in stub.WatchPods(request):
                down_since, delay = None, 0.1
                if msg.HasField("synced"):
                    synced = True
                if synced:
                    revision = max(revision, msg.revision)
                yield msg
            err = None  # podsyncd ended the stream: resume as after a break
        except grpc.RpcError as e:
            r = reason(e)
            retryable = e.code() == grpc.StatusCode.UNAVAILABLE or r == SLOW_CONSUMER
            if not retryable:
                raise
            err = e
        if on_break:
            on_break(err, revision)
        if not synced:
            revision = 0
        now = time.monotonic()
        down_since = down_since or now
        if now - down_since > retry_for:
            raise WatchBroken("podsyncd unreachable for %.0fs: %s" % (retry_for, err))
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
