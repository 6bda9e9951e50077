// Runs pods on podsyncd and follows WatchPods, resuming across restarts.
//
//   podsyncctl convert -f pod.yaml > run.json
//   node dist/example.js --socket /run/podsync/podsync.sock run.json
//
// It sends run.json (a RunPodsRequest as the API's JSON, which podsyncctl
// convert prints) with RunPods, waits until the pods run, then prints each
// change WatchPods reports, one line each, resuming after podsyncd
// restarts. With --until-deleted it exits 0 once every pod it ran is
// deleted.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { fromJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { RunPodsRequestSchema, WaitFor, type RunPodsSummary } from "./gen/podsync/v1/pod_sync_service_pb.js";
import { connect, fieldViolations, reason, Reason, watchPods } from "./client.js";

function say(...words: unknown[]): void {
  console.log(words.join(" "));
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      socket: { type: "string" },
      url: { type: "string" },
      ca: { type: "string" },
      cert: { type: "string" },
      key: { type: "string" },
      "until-deleted": { type: "boolean" },
    },
  });
  if (positionals.length !== 1 || (!values.socket && !values.url)) {
    say("usage: example.js (--socket PATH | --url https://HOST:PORT --ca F --cert F --key F) [--until-deleted] REQUEST.json");
    return 2;
  }
  const client = connect({ socket: values.socket, url: values.url, ca: values.ca, cert: values.cert, key: values.key });
  const request = fromJsonString(RunPodsRequestSchema, readFileSync(positionals[0], "utf8"));
  if (request.waitFor === WaitFor.UNSPECIFIED) {
    request.waitFor = WaitFor.RUNNING;
  }

  let summary: RunPodsSummary | undefined;
  try {
    for await (const msg of client.runPods(request, { timeoutMs: 120_000 })) {
      if (msg.event.case === "summary") {
        summary = msg.event.value;
      }
    }
  } catch (e) {
    // Branch on the reason, never on the message.
    if (reason(e) === Reason.InvalidSpec) {
      for (const [field, problem] of fieldViolations(e)) {
        say("invalid", field, problem);
      }
      return 2;
    }
    const err = ConnectError.from(e);
    say("error", err.code, reason(err), err.rawMessage);
    return 1;
  }
  say("ran", summary?.reachedTarget ?? 0, "of", request.pods.length);
  if (summary?.reachedTarget !== request.pods.length) {
    return 1;
  }

  const pending = new Set(request.pods.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`));
  try {
    const watch = watchPods(client, {
      onBreak: (err, revision) => say("broken", err ? reason(err) || Code[err.code] : "END", revision),
    });
    for await (const msg of watch) {
      const who = `${msg.pod?.namespace ?? ""}/${msg.pod?.name ?? ""}`;
      say(msg.change.case, msg.revision, who);
      if (msg.change.case === "deleted") {
        pending.delete(who);
        if (values["until-deleted"] && pending.size === 0) {
          return 0;
        }
      }
    }
  } catch (e) {
    if (reason(e) === Reason.RevisionCompacted) {
      say("compacted: list again and watch from the listed revision");
    } else {
      const err = ConnectError.from(e);
      say("error", err.code, reason(err), err.rawMessage);
    }
    return 1;
  }
  return 0;
}

// Exit at once: a keep-alive socket would hold the process open.
process.exit(await main());
