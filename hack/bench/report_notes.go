package main

// profileNotes records what the profiles of this report's first runs
// found and what was done, with the figures before and after (medians of
// full runs of make bench on this machine kind), and what remains.
const profileNotes = `## Profiles: before and after

Eight rounds. Round 1: the first full run (load average 13–20, so noisier) and the run after its
fixes (pprof of podsyncd):

| figure | before | after | what changed |
|---|---|---|---|
| planner, 10 running containers | 47 µs | 14–15 µs | ContainerHash writes the bytes encoding/json wrote, without reflection (hash values pinned, 3000-pod equality test, fuzz target); the back-off lookup hashes only containers with an exited instance |
| ListPods p99, 200 pods, 8 clients | 454 ms | 49 ms | stored pods are not re-checked for unsupported fields (59% of CPU under this load); the store caches decoded records and ListPods/WatchPods share them instead of copying |
| GetPod p99 | 8.0 ms | 4.6 ms | the same conversion and cache |
| exit → WatchPods status, 2.x | 144 ms | 35–42 ms | the pass that finds a container exited publishes that status before it restarts it, as the kubelet's status manager does |
| exit → running again, 2.x | 144 ms | 107 ms | nothing aimed at it: the first run's machine was loaded (load average 13–20) |
| sync passes per new pod | 3 | 2 | a wake-up pending when a pass starts is served by that pass |
| podsyncd CPU per pod, N = 30 | 6.0 ms | 5.0–5.7 ms | the above (then read in 10 ms clock ticks, ±0.33 ms per pod) |

Round 2: full runs of make bench before and after (podsyncd's CPU from then on in nanoseconds, from
its threads' schedstat; ` + "`perf record -g`" + ` at 5 kHz over 90 pods for the breakdown, pprof's 100 Hz
being too coarse for a few milliseconds a pod):

| figure | before | after | what changed |
|---|---|---|---|
| sync passes per new pod | 2 | 1 | the container events of a pass's own creates and starts, and a relist finding the pod as a pass left it, no longer cost a pass: the watcher's hints say what changed (the event, or the relist's snapshot of the pod's objects), and a worker skips a pass when its last clean pass's final view shows all of it and a pass over that view would do nothing (` + "`podsync_sync_passes_skipped_total`" + `) |
| CRI calls per new pod | 13 | 8 | one pass; a pass's end reads the statuses of the objects it found and created instead of listing the runtime again (it lists after a failed create) and reuses the new sandbox's status |
| podsyncd CPU per pod, N = 30 | 5.0–5.7 ms | 4.0–4.8 ms (medians of 5 full and run-only runs) | the above; writes queued during a store commit share the next commit (two fdatasyncs per group instead of per write); admission and RunPods read the store's shared records instead of copies |
| ListPods p99, 200 pods, 8 clients | 49 ms | 32–33 ms | GetPod and ListPods convert a pod to its API message only when it changed (a cache holding its records weakly, so nothing of deleted pods stays) |
| GetPod p99 | 4.6 ms | 4.2–4.5 ms | the same, and reads that succeed log at debug: a line per poll was a fifth of GetPod's CPU |

What remains of podsyncd's CPU per pod (perf, N = 30): the CRI calls, 8 a pod against the raw
floor's 3 — the two lists at the start of a new pod's pass, the new sandbox's status (its IP),
ImageStatus and the final ContainerStatus, all of which the kubelet makes too — about 20% with
their gRPC reader; the store about 10% (the pod is stored before its pass and its status and events
after it: two commits, shared under concurrency); the pod's directories and files about 7% (six
directories, as the kubelet's pod data and log directories, the hosts and termination-message
files); the CRI event stream about 4%; and the Go runtime's scheduling about 25% (sysmon and idle
Ps woken around each blocking syscall and gRPC hand-off). At N = 1 nothing is shared between pods
(each commit is its own, events and garbage collection are not amortised), which is why one pod
alone costs about 5.1–5.4 ms: the same work, not more of it. Going lower means fewer blocking syscalls
(podsync keeps the kubelet's directory layout on the node's disk) or fewer CRI calls (skipping the
start-of-pass lists of a pod never seen needs an authority podsync lacks: CRI events can be lost,
the relist is the authority). RSS with 200 pods varies between runs (42–46 MiB over this round's
last runs; 51 MiB in one run before the message cache held its records weakly): about 22 MiB of it
is podsyncd's binary mapped from disk, the rest Go's heap, which holds about 12 MiB live.

Round 3 (issue 24: events on 1.6, cheaper passes). Runs of ` + "`make bench BENCH_FLAGS='-sections run,latency -flavours … -n 30 -runs 3'`" + ` (2 runs for the last
1.6 row) on a machine shared with other jobs: load averages 17–48 during the 2.x runs, 10–30 during
the last 1.6 one, so absolute times and CPU are inflated and each row compares runs of one sitting;
podsyncd's CRI calls per pod are from its metrics. ` + "`BenchmarkNodeApplyNewPod`" + ` (` + "`engine`" + `: one Apply of a new
pod on the fake runtime, ` + "`-count 8`" + `, benchstat) isolates podsync's own share:

| figure | before | after | what changed |
|---|---|---|---|
| CRI calls per new pod, 2.x, N = 30 | 10.2 (2.00 ListPodSandbox, 2.03 ListContainers, 1.17 PodSandboxStatus) | 6.0 (no list; 1.00 PodSandboxStatus) | a new pod's first pass plans from an empty view without listing (only the node's passes create a pod's objects: a pod it has never run and did not find at its start has none, as the kubelet's first sync of a new pod plans from an empty cache); a housekeeping round lists the running containers once instead of reading every pod's view every 10 s |
| CRI calls per Apply, ` + "`BenchmarkNodeApplyNewPod`" + ` | 8.23 | 6.20 | the first of the above |
| bytes allocated per Apply, same | 924 KiB | 194 KiB | a sandbox's create took a fresh deflate compressor (~800 KiB of tables) for its ` + "`podsync.io/pod-spec`" + ` annotation; compressors are pooled |
| podsyncd CPU per pod, 2.x, N = 30 | 6.91 ms (6.58–7.14; load 17→39) | 5.27 ms (5.15–5.40; load 48→40) after the first list and the pool, 4.79 ms (4.78–4.91; load 31→23) after the housekeeping list | the above; the target of 3 ms is not reached on this loaded machine (round 2's quiet-machine figure was 4.0–4.8 ms) |
| exit → WatchPods status, 1.6 | up to a relist (1 s) + a pass (not measured again) | 34.5 ms (32.1–40.6), floor 33.3 ms | containerd's own event service (` + "`/tasks/exit`" + ` and the other task topics) where CRI has no events, a hint once CRI shows the exit (containerd 1.6 publishes it before its CRI plugin marks the container exited) |
| exit → running again, 1.6 | up to a relist (1 s) + a pass (not measured again) | 97.9 ms (96.0–105) | the same |
| passes and lists per new pod, 1.6, N = 30 | 1.83 passes, 2.97 ListContainers, 1.80 ListPodSandbox (with this round's first event commits) | 1.00, 0, 0; CPU 7.03 → 3.99 ms (3.54–4.43), RunPods ÷ floor 1.26 → 1.06 | the watcher relisted for every event of an id no relist had listed, a pass's own starts included, and those relists handed other workers snapshots taken mid-pass; it now relists only for the stop of an unknown id |

What remains of the CRI calls per new pod: RunPodSandbox, PodSandboxStatus (the pod's IP, which
the kubelet reads the same way), ImageStatus (the pull policy), CreateContainer, StartContainer and
the final ContainerStatus — the one call the kubelet does not make in its pass (its status comes from
the PLEG's next read). It stays: the status's startedAt and imageID are the runtime's, and a value
podsync made up would move when a later pass reads the real one.

Round 4 (issue 24, the CPU per pod). ` + "`perf record -F 1999 -a -g`" + ` over two runs of
` + "`-sections run -flavours 2 -n 100 -runs 2`" + `, podsyncd's samples kept only while a RunPods was in
progress (2802 samples: 7.0 ms a pod under perf, at 67cb9bf), each sample counted once, in the first of these
that its stack shows:

| share of podsyncd's CPU during RunPods, N = 100 | |
|---|---|
| store commits: bbolt's page writes and its two fdatasyncs a commit, mostly kernel time on this virtio disk | 16.3% |
| the pod's directories and files (as the kubelet's: pod, volumes, plugins, containers and log directories, hosts and termination-message files, the pod cgroup); ext4 allocating inodes is most of it | 9.0% |
| CRI calls, in the calling goroutine | 10.1% |
| gRPC's transport goroutines (reader, writer), the CRI connection's mostly | 17.4% |
| the CRI event stream (containerd 2.x sends a pod's whole status with each of its four events) | 4.8% |
| Go's scheduler (parking, finding work, sysmon, starting threads) | 14.2% |
| garbage collection (background marking) | 5.5% |
| RunPods' own server and stream | 3.3% |
| the rest: planning, statuses, steps and their events, logging | 19.4% |

About four fifths is I/O, transport and the Go runtime around them; podsync's own code is the last
fifth, so the target of 3 ms a pod would need fewer durable commits or fewer files than the kubelet's
layout, not leaner code. Two cuts from the profile, measured in one sitting (two rounds each of
base de2bd22 and the cuts, alternating, on a machine about 1.7× slower than this report's run):

| figure | before | after | what changed |
|---|---|---|---|
| podsyncd CPU per pod, 2.x, N = 100 | 9.49, 8.93 ms | 8.70, 8.58 ms | the two below |
| ` + "`BenchmarkEncodePodSpec`" + `, one container / ten | 78 / 157 µs | 38 / 98 µs | the pod-spec annotation is compressed at BestSpeed: the level-9 compressor cleared 640 KiB of hash chains on each of its two resets a sandbox; the annotation grows from 680 to 700 bytes |
| decodes of the stored pod per pass's Append | one per event and status | one | a pass's events and its status are appended together; each change decoded the whole stored record again |

Round 5 (issue 40, the store's commits per pod). The report of 2026-12-05 (739a1e4) counted 2.03 store
writes and 2.00 commits a pod at N = 30: the writes of pods started together did not share commits.
Apply stored each pod's spec under one node-wide lock held across the store's commit, so a batch's pods
were stored one commit after another, two fdatasyncs each. The lock only has to serialise the applies
of one pod (an update read before a debug container was added would drop it); admission has its own lock
and reservations, and the store checks names, UIDs and preconditions again in the write's transaction.
The lock is now the pod's own (by namespace/name), and a batch's specs share commits. The store's
commits and syncs in the table of podsyncd's work per pod above are after it. Before and after in one
sitting on the fake runtime (` + "`BenchmarkNodeRunPods30`" + `: a RunPods of 30 new single-container pods, the
store on disk; 3 counts of 5 batches each, on a 2-core machine running CI at the time):

| figure | before (4d9322a) | after (26781c5) |
|---|---|---|
| store commits per pod | 1.56–1.71 | 0.21–0.27 |
| store syncs (fdatasync, fsync) per pod | 3.16–3.45 | 0.44–0.57 |
| time of a batch of 30 | 0.32–0.57 s | 0.11–0.15 s |

Round 6 (issue 40, the store's encoding). A pass decodes and encodes its pod's stored record several
times (Put, the pass's Append, MarkDeleting, Delete, the lookups by name), and encoding/json was a sixth
of the engine's CPU in ` + "`BenchmarkNodeApplyNewPod`" + ` (decodeRecord alone 15 %). A pod's record is now the
API's own protobuf (k8s.io/api's generated code, as the API server keeps objects in etcd) in a small
envelope: the store's schema 2; schema 1's JSON records still read. Before (5c76117) and after (fc3688f)
in one sitting on a quiet 2-core machine:

| figure | before | after |
|---|---|---|
| a record as a hollow node holds it (a pod, its kube-root-ca.crt and token): decode / encode, 3 counts | 66–74 / 18–20 µs | 10–12 / 5.6–6.6 µs |
| ` + "`BenchmarkNodeApplyNewPod`" + `, time per Apply, median of 5 interleaved runs of 2,000 | 764 µs | 641 µs |
| the same runs' process CPU (user + system), median | 6.43 s | 5.30 s |
| allocations per Apply | 1,155 | 1,099 |
| a hollow podsyncd's CPU per pod, 100 pods through SyncPod with their token and kube-root-ca.crt, its state on /dev/shm, 10 interleaved pairs | 2.2–3.7 ms | 2.5–3.4 ms |

The last row is within its noise (10 ms clock ticks, ±0.1 ms a pod, and the order of a pair moved it
more): the record's encoding is a small part of a node's work per pod, as round 4 found.

Round 7 (issue 40, the responses' encoding). Under the API load above, encoding the pods of each ListPods
response was two thirds of podsyncd's CPU for the call (a 10 s profile: protobuf's Size 23 %, its marshal
36 %), although the messages are the cached ones of round 2 until a pod changes. The gRPC listener's codec
now writes GetPod and ListPods responses from an encoding made once per cached message (the same bytes
grpc's proto codec writes; every other message is grpc's codec's). Before (29adf1d) and after (e92a1b7),
one run each of ` + "`-sections api`" + ` in one sitting on a quiet 2-core machine, and the handlers' benchmarks with
the server's encoding:

| figure | before | after |
|---|---|---|
| ListPods, 250 pods, 8 clients: calls in 10 s / p50 / p99 | 4,489 / 16.0 / 51.5 ms | 6,117 / 11.7 / 41.4 ms |
| GetPod, 250 pods, 8 clients: calls in 10 s / p50 / p99 | 86,251 / 0.70 / 5.06 ms | 105,655 / 0.58 / 4.29 ms |
| ` + "`BenchmarkListPods200`" + `, handler and encoding, 3 counts | 614–680 µs, 167 KB | 99–105 µs, 28 KB |
| ` + "`BenchmarkGetPod200`" + `, 5 counts | 6.2–6.5 µs | 2.4–3.0 µs |

Round 8 (issue 40, what the 3 ms a pod would take). podsyncd's CPU per pod at N = 100, its root and
pod-log directories on the disk (ext4, where a node keeps them) and on /dev/shm (a tmpfs: no fdatasync,
no journal), in alternating runs of ` + "`-sections run -flavours 2 -n 100 -runs 2`" + ` on a quiet 2-core machine (2a2f239):

| podsyncd's state | rounds | median |
|---|---|---|
| on the disk | 5.19, 6.72, 6.28, 6.85, 5.90, 6.43 ms | 6.4 ms |
| on /dev/shm | 5.44, 5.77, 4.13, 4.92 ms | 5.2 ms |

The disk's whole share — the store's commits (0.96 a pod, 1.95 syncs) and the pod's directories and
files in the kubelet's layout (in a pprof profile of one run, ` + "`os.MkdirAll`" + ` 17 % of podsyncd's CPU, the hosts
and termination-message files 8 %) — is about 1.2 ms of the 6.4. A store that cost nothing would leave
more than 3 ms, so coalescing the status commits cannot reach the target by itself: the rest is CRI over
gRPC (six calls a new pod and their transport goroutines), Go's scheduler and garbage collection around
them, and podsync's own planning, statuses, steps and logging (round 4). Publishing a status before its
commit, the way to coalesce without delaying it, was not done: a crash would lose statuses a watcher had
already seen, where WatchPods promises every change once across restarts (test/robustness replays the
log after each kill and compares).

The same round cut the read calls' interceptors: with debug off, a read that ends at the logging
middleware's info level (it is then logged at debug, so not at all) no longer runs the middleware, which
built its fields for every call, and the request scope's logger encodes its fields only when used.
Before (521f1bf) and after (2a2f239), alternating:

| figure | before | after |
|---|---|---|
| ` + "`BenchmarkGetPod200Served`" + ` (a served GetPod, JSON log at info): allocations, bytes a call | 404, 26.1 KB | 341, 22.1 KB |
| the same, process CPU (client and server) a call, 4 runs of 50,000 calls | 153–174 µs, median 163 | 128–161 µs, median 141 |
| ` + "`-sections api`" + `, GetPod, 250 pods, 8 clients: calls in 10 s / p99, 2 runs | 101,411 / 4.14 ms; 87,445 / 5.06 ms | 95,434 / 4.84 ms; 95,993 / 4.65 ms |

Under 8 clients on 2 cores the benchmark's clients take half the machine, and the API section's spread
from run to run is larger than the cut.

`
