// Command run-cluster is `make run-cluster`: as root, it builds podsyncd
// and podsync-vk into .tmp/bin and the Kubernetes binaries into .tmp/kube
// (hack/kube/build.sh, once), starts a control plane on 127.0.0.1
// (internal/testing/localkube), two podsync nodes (--nodes N for more; each a
// podsyncd on its own private containerd, internal/testing/localcri) and
// podsync-vk serving them, and metrics-server as the Metrics API (kubectl
// top; built from the module proxy into .tmp/kube with the rest), waits
// for the Nodes to be Ready, prints the KUBECONFIG and PATH to use
// with kubectl, and stays up until ^C; then it stops everything and
// removes what it started. With --once it checks and exits.
package main
