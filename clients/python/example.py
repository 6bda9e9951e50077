#!/usr/bin/env python3
"""Runs pods on podsyncd and follows WatchPods, resuming across restarts.

  podsyncctl convert -f pod.yaml > run.json
  python3 example.py --target unix:///run/podsync/podsync.sock run.json

It sends run.json (a RunPodsRequest as the API's JSON, which podsyncctl
convert prints) with RunPods, waits until the pods run, then prints each
change WatchPods reports, one line each, resuming after podsyncd restarts.
With --until-deleted it exits 0 once every pod it ran is deleted.
"""

import argparse
import sys

from google.protobuf import json_format

import podsync_client
from podsync.v1 import pod_sync_service_pb2 as pb


def say(*words):
    print(*words, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("request", help="a RunPodsRequest as JSON (podsyncctl convert)")
    ap.add_argument("--target", default="unix:///run/podsync/podsync.sock")
    ap.add_argument("--ca")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--until-deleted", action="store_true", help="exit once every pod run is deleted")
    args = ap.parse_args()

    stub, _ = podsync_client.connect(args.target, args.ca, args.cert, args.key)
    with open(args.request) as f:
        request = json_format.Parse(f.read(), pb.RunPodsRequest())
    if request.wait_for == pb.WAIT_FOR_UNSPECIFIED:
        request.wait_for = pb.WAIT_FOR_RUNNING

    try:
        summary = None
        for msg in stub.RunPods(request, timeout=120):
            if msg.HasField("summary"):
                summary = msg.summary
    except podsync_client.grpc.RpcError as e:
        # Branch on the reason, never on the message.
        if podsync_client.reason(e) == podsync_client.INVALID_SPEC:
            for field, problem in podsync_client.field_violations(e).items():
                say("invalid", field, problem)
            return 2
        say("error", e.code().name, podsync_client.reason(e), e.details())
        return 1
    say("ran", summary.reached_target, "of", len(request.pods))
    if summary.reached_target != len(request.pods):
        return 1

    pending = {(p.metadata.namespace, p.metadata.name) for p in request.pods}

    def on_break(err, revision):
        why = podsync_client.reason(err) if err else "END"
        say("broken", why or err.code().name, revision)

    try:
        for msg in podsync_client.watch_pods(stub, on_break=on_break):
            kind = msg.WhichOneof("change")
            say(kind, msg.revision, msg.pod.namespace + "/" + msg.pod.name)
            if kind == "deleted":
                pending.discard((msg.pod.namespace, msg.pod.name))
                if args.until_deleted and not pending:
                    return 0
    except podsync_client.grpc.RpcError as e:
        if podsync_client.reason(e) == podsync_client.REVISION_COMPACTED:
            say("compacted: list again and watch from the listed revision")
        else:
            say("error", e.code().name, podsync_client.reason(e), e.details())
        return 1
    except podsync_client.WatchBroken as e:
        say("error", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
