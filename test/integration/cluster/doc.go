//go:build integration

// Package cluster runs podsync-vk against a real Kubernetes control
// plane (internal/testing/localkube: etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager v1.37.2, built by hack/kube/build.sh and kept
// under .tmp) with two podsync nodes, each a podsyncd child process on its
// own private containerd (internal/testing/localcri): the package's instance and
// a second one TestMain starts.
package cluster
