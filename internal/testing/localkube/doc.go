// Package localkube runs a Kubernetes control plane on 127.0.0.1 for
// podsync's cluster tests and `make run-cluster`: etcd, kube-apiserver,
// kube-scheduler and kube-controller-manager at the version
// hack/kube/build.sh builds (v1.37.2, matching k8s.io/api), with
// certificates made here (a CA, the apiserver's serving certificate, an
// admin client certificate in system:masters, the service-account key
// pair), free ports, a kubeconfig, and readiness checks. Stop ends every
// process it started and removes what it wrote.
//
// It is the control-plane peer of internal/testing/localcri, which gives each test
// a private containerd; it makes no nodes: podsync-vk registers those.
package localkube
