// Package clients holds the tests of the generated Python and TypeScript
// clients (clients/) against a real podsyncd on a private containerd:
// each client's example runs a pod with RunPods and follows WatchPods
// across a restart of podsyncd until the pod is deleted. make
// test-clients installs the clients' toolchains (Debian, npm), generates
// the clients and runs them; make test-integration leaves this package
// out, as it does test/integration/cluster.
package clients
