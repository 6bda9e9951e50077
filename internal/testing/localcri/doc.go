// Package localcri starts private, fully isolated containerd instances that
// serve CRI on a unix socket, for integration tests, tools, benchmarks and
// `make run`.
//
// An [Instance] is one containerd process with its own root, state, socket,
// runc root, CNI configuration, CNI network and bridge, host-local IPAM data
// directory, pod subnet and host ports, all derived from a short run id, so
// that any number of instances (two test packages in parallel, `make run`
// beside `make test`) never collide. Two flavours are offered ([Flavour]):
// containerd v2.4.2 built once from the Go module proxy into the repository's
// tools directory (.tmp/), and Debian's containerd 1.6 (/usr/bin/containerd).
// [FlavourFromEnv] reads PODSYNC_CONTAINERD ("2", the default, or "1.6").
//
// No registry outside the machine is reachable, so localcri builds its images
// itself: [PauseImage] from the static program in ./pause and
// [BusyboxImage] from Debian's static busybox. Image tarballs are cached under
// .tmp/images/ keyed by a hash of their inputs, imported into every instance
// with ctr, and also served by an in-process OCI [Registry] on 127.0.0.1 that
// containerd pulls from over plain HTTP; the registry can be made slow or made
// to fail so that image pulls are tested for real.
//
// Typical use from a TestMain:
//
//	inst, err := localcri.Start(ctx, localcri.Options{Logger: log})
//	if err != nil { ... }               // never a skip: a missing runtime is a failure
//	defer inst.Teardown(context.WithoutCancel(ctx))
//	rs, err := inst.RuntimeService(ctx) // a k8s.io/cri-api RuntimeService
//
// Start installs what is missing (Debian packages through apt-get when run as
// root, otherwise an error naming them) and needs root to run containerd.
// Teardown stops every pod through CRI, stops containerd by its PID, kills the
// instance's shims, unmounts everything under its directory, deletes its
// bridge and removes its directories; it then checks that nothing tagged with
// the run id is left in the process table, the mount table, the links and the
// network namespaces, and returns an error naming whatever is.
//
// The command ./cmd/localcri (`go run ./hack/localcri
// up|down|status`) keeps one instance running for a developer.
package localcri
