// Package conformance runs the Kubernetes node-conformance tests on podsync
// nodes (make test-conformance): it builds the e2e images the focused
// tests run, from the Kubernetes module's own sources (images.go), and
// reads ginkgo's JUnit report into a per-test result file and a summary
// (report.go).
package conformance
