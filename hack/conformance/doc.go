// Command conformance is make test-conformance: as root, it builds the
// Kubernetes binaries, the e2e suite (e2e.test), ginkgo and the e2e images
// (hack/kube/build.sh, internal/testing/conformance; cached under .tmp),
// starts a control plane on 127.0.0.1 with podsync nodes behind podsync-vk
// (internal/testing/localcluster), runs the Kubernetes node-conformance
// tests on them with ginkgo, and writes a per-test result file and a
// summary to .tmp/conformance. It exits 1 when a test failed.
//
//	go run ./hack/conformance                 # the whole focused suite
//	go run ./hack/conformance --subset ci     # the bounded subset CI runs
//	go run ./hack/conformance --focus 'Pods should get a host IP' --keep
package main
