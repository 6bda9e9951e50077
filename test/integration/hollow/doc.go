//go:build integration

// Package hollow runs podsync-vk against a real Kubernetes control plane
// (internal/testing/localkube, v1.37.2, built by hack/kube/build.sh and
// kept under .tmp) with two hollow podsync nodes (hack/hollow: podsyncd on
// a simulated runtime; internal/testing/localcluster with Hollow): a
// Deployment over both nodes, a scale-down, a deleted pod replaced. It
// needs no containerd and no root, and runs in `make test-cluster` beside
// test/integration/cluster; make bench-scale runs the same nodes by the
// hundred.
package hollow
