// The podsync.v1 API from TypeScript over the Connect protocol (JSON over
// HTTP/1.1, on podsyncd's unix socket or its mTLS listener). The generated
// code (gen/, made by `make clients` with protoc-gen-es) is the API; this
// module adds what every caller needs beside it: a client, the
// google.rpc.ErrorInfo reason of an error (callers branch on it, never on
// the message), and WatchPods that resumes after a break without a gap or
// a duplicate.
import { readFileSync } from "node:fs";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { BadRequestSchema, ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { PodSyncService, type WatchPodsResponse } from "./gen/podsync/v1/pod_sync_service_pb.js";

/** The ErrorInfo domain of podsync's errors. */
export const DOMAIN = "podsync.io";

/** Reasons a caller branches on (errorinfo/errorinfo.go has them all). */
export const Reason = {
  RevisionCompacted: "REVISION_COMPACTED",
  SlowConsumer: "SLOW_CONSUMER",
  ShuttingDown: "SHUTTING_DOWN",
  RuntimeUnavailable: "RUNTIME_UNAVAILABLE",
  PodNotFound: "POD_NOT_FOUND",
  InvalidSpec: "INVALID_SPEC",
} as const;

export type PodSyncClient = Client<typeof PodSyncService>;

/** Where podsyncd listens and, for TCP, the mTLS files. */
export interface Target {
  /** The unix socket's path, such as /run/podsync/podsync.sock. */
  socket?: string;
  /** "https://host:port" of an mTLS listener, with ca, cert and key. */
  url?: string;
  ca?: string;
  cert?: string;
  key?: string;
}

/** connect returns a PodSyncService client over the Connect protocol. */
export function connect(target: Target): PodSyncClient {
  const transport = target.socket
    ? createConnectTransport({
        baseUrl: "http://podsync",
        httpVersion: "1.1",
        nodeOptions: { socketPath: target.socket },
      })
    : createConnectTransport({
        baseUrl: target.url ?? "",
        httpVersion: "1.1",
        nodeOptions: {
          ca: target.ca ? readFileSync(target.ca) : undefined,
          cert: target.cert ? readFileSync(target.cert) : undefined,
          key: target.key ? readFileSync(target.key) : undefined,
        },
      });
  return createClient(PodSyncService, transport);
}

/** reason returns the podsync ErrorInfo reason of an error, or "". */
export function reason(err: unknown): string {
  for (const info of ConnectError.from(err).findDetails(ErrorInfoSchema)) {
    if (info.domain === DOMAIN) {
      return info.reason;
    }
  }
  return "";
}

/** fieldViolations returns field → problem of an INVALID_ARGUMENT. */
export function fieldViolations(err: unknown): Map<string, string> {
  const out = new Map<string, string>();
  for (const br of ConnectError.from(err).findDetails(BadRequestSchema)) {
    for (const v of br.fieldViolations) {
      out.set(v.field, v.description);
    }
  }
  return out;
}

/** A break is retried: podsyncd restarting, unreachable, or finding us slow. */
function retryable(err: ConnectError): boolean {
  if (err.code === Code.Unavailable || reason(err) === Reason.SlowConsumer) {
    return true;
  }
  // The socket missing or refused while podsyncd restarts.
  const cause = err.cause as { code?: string } | undefined;
  return ["ECONNREFUSED", "ENOENT", "ECONNRESET", "EPIPE"].includes(cause?.code ?? "");
}

export interface WatchOptions {
  namespace?: string;
  /** How long podsyncd may stay away before watchPods gives up (ms). */
  retryForMs?: number;
  /** Called at each break with the error (undefined if the stream ended) and the revision resumed from. */
  onBreak?: (err: ConnectError | undefined, revision: bigint) => void;
}

/**
 * watchPods yields WatchPods' messages, resuming after breaks: with no
 * revision it starts with the current pods and a synced message; after a
 * break it watches again from the last revision it yielded after synced, so
 * every change is yielded once and in order (a break before synced lists
 * again). It throws any other error, REVISION_COMPACTED (list again)
 * included, and the last break's error when podsyncd stayed away longer
 * than retryForMs.
 */
export async function* watchPods(client: PodSyncClient, opts: WatchOptions = {}): AsyncGenerator<WatchPodsResponse> {
  let revision = 0n;
  let synced = false;
  let downSince: number | undefined;
  let delay = 100;
  for (;;) {
    let broken: ConnectError | undefined;
    try {
      for await (const msg of client.watchPods({ sinceRevision: revision, namespace: opts.namespace ?? "" })) {
        downSince = undefined;
        delay = 100;
        if (msg.change.case === "synced") {
          synced = true;
        }
        if (synced && msg.revision > revision) {
          revision = msg.revision;
        }
        yield msg;
      }
    } catch (e) {
      broken = ConnectError.from(e);
      if (!retryable(broken)) {
        throw broken;
      }
    }
    opts.onBreak?.(broken, revision);
    if (!synced) {
      revision = 0n;
    }
    downSince ??= Date.now();
    if (Date.now() - downSince > (opts.retryForMs ?? 60_000)) {
      throw broken ?? new ConnectError("podsyncd ended the watch and stayed away", Code.Unavailable);
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 2000);
  }
}
