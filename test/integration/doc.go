// Package integration tests podsync against a real containerd. Its tests
// carry the build tag integration:
//
//	go test -tags integration ./test/integration/...                        # containerd v2.4.2
//	PODSYNC_CONTAINERD=1.6 go test -tags integration ./test/integration/... # Debian's containerd 1.6
//
// TestMain starts one private containerd per test binary with localcri
// (fully isolated: two runs in parallel never collide), prints how long each
// stage of the start took, and tears it down at the end; a teardown that
// leaves anything tagged with the run id behind (processes, mounts, links,
// network namespaces, iptables rules) fails the run. A runtime that cannot
// start is a failure with the reason, never a skip. The tests need root and
// build containerd v2.4.2 into .tmp/ on first use (5 to 10 minutes on 2 cores).
package integration
