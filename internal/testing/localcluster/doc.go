// Package localcluster starts a Kubernetes control plane on 127.0.0.1
// (internal/testing/localkube) with podsync nodes behind podsync-vk: each
// node a podsyncd on its own private containerd (internal/testing/localcri),
// every image it is given imported first; and, if asked, metrics-server as
// the Metrics API (kubectl top). make run-cluster and make
// test-conformance run on it. With Options.Hollow the nodes are hollow
// podsync nodes (hack/hollow), up to a few hundred, with no containerd
// and no root: test/integration/hollow and make bench-scale run on those,
// one or several podsync-vk serving them.
package localcluster
