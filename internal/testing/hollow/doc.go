// Package hollow is the hollow podsync node, as kubemark's hollow kubelet:
// podsyncd itself — flags, store, pod workers, planner, syncer, watcher,
// prober, server — whose container runtime is simulated in process, so
// that a machine runs many podsync nodes under one control plane for the
// scale benchmarks (make bench-scale) and the hollow cluster test
// (test/integration/hollow).
//
// Only what podsyncd reaches outside its files is replaced
// (internal/daemon.Host):
//
//   - the runtime is Runtime, enginetest.FakeRuntime with timed sleeps:
//     sandboxes and containers start at once, a command's `sleep N` takes
//     N (so `sh -c "sleep 30; exit 1"` exits 1 after 30 s), whatever runs
//     no sleep or `sleep infinity` runs until stopped; pulls succeed at once
//     without a network; usage is plausible (a millicore and 4 MiB a
//     container); logs are the CRI log files of what the command echoes;
//     ExecSync (exec probes, hooks) interprets the command; exec, attach
//     and port-forward are refused with a message saying why;
//   - the cgroup file systems are a directory under --root-dir, so the
//     cgroup root's lock and any pod cgroup are plain files there;
//   - the pods' memory-backed volumes (secrets, projected service-account
//     tokens, medium Memory emptyDirs) are plain directories (Mounter):
//     a hollow node needs no root and adds nothing to the mount table.
//
// What stays real: the files under --root-dir and --pod-log-dir (the
// store, volumes, logs), the API sockets, and the bind mounts of subPath
// and hostPath volumes, which need root as on a real node.
// Probes other than exec reach no process: an httpGet or tcpSocket
// probe fails, as against a pod IP with nothing listening.
//
// hack/hollow is its main; nothing of it is linked into podsyncd
// (make check-deps).
package hollow
