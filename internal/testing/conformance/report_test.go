package conformance_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsync/podsync/internal/testing/conformance"
)

// A JUnit report as ginkgo v2 writes it, trimmed.
const junit = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" disabled="1" errors="0" failures="1" time="12.5">
  <testsuite name="Kubernetes e2e suite" package="/e2e" tests="5" disabled="1" skipped="1" errors="0" failures="1" time="12.5">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1.5"></testcase>
    <testcase name="[It] [sig-node] Pods should get a host IP [NodeConformance] [Conformance]" classname="Kubernetes e2e suite" status="passed" time="4.2"></testcase>
    <testcase name="[It] [sig-node] Probing container should be restarted [NodeConformance] [Conformance]" classname="Kubernetes e2e suite" status="failed" time="6.1">
      <failure message="[FAILED] pod never restarted&#xA;Expected a restart" type="failed">[FAILED] pod never restarted
more</failure>
    </testcase>
    <testcase name="[It] [sig-storage] EmptyDir volumes should support (root,0644,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[SynchronizedAfterSuite]" classname="Kubernetes e2e suite" status="failed" time="0.1">
      <failure message="cleanup failed" type="failed"></failure>
    </testcase>
  </testsuite>
</testsuites>`

func TestReadJUnit(t *testing.T) {
	got, err := conformance.ReadJUnit(strings.NewReader(junit))
	if err != nil {
		t.Fatal(err)
	}
	want := []conformance.Result{
		{Name: "[SynchronizedAfterSuite]", Outcome: conformance.Failed, Message: "cleanup failed", Seconds: 0.1},
		{Name: "[sig-node] Pods should get a host IP [NodeConformance] [Conformance]", Outcome: conformance.Passed, Seconds: 4.2},
		{Name: "[sig-node] Probing container should be restarted [NodeConformance] [Conformance]", Outcome: conformance.Failed,
			Message: "[FAILED] pod never restarted", Seconds: 6.1},
		{Name: "[sig-storage] EmptyDir volumes should support (root,0644,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]", Outcome: conformance.Skipped},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if s := conformance.Summarize(got).String(); s != "1 passed, 2 failed, 1 skipped" {
		t.Errorf("summary %q", s)
	}
	var b strings.Builder
	if err := conformance.WriteResults(&b, got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "FAIL [sig-node] Probing container should be restarted [NodeConformance] [Conformance]\n     [FAILED] pod never restarted\n") ||
		!strings.HasSuffix(b.String(), "\n1 passed, 2 failed, 1 skipped\n") {
		t.Errorf("results file:\n%s", b.String())
	}
}

// TestAreas: tests grouped by their sig and subject, skipped ones left
// out, as the docs' table of what a podsync node supports.
func TestAreas(t *testing.T) {
	results := []conformance.Result{
		{Name: "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook should execute poststart exec hook properly [NodeConformance] [Conformance]", Outcome: conformance.Passed},
		{Name: "[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook should execute prestop http hook properly [NodeConformance] [Conformance]", Outcome: conformance.Failed},
		{Name: "[sig-node] Security Context When creating a container with runAsUser should run the container with uid 65534 [LinuxOnly] [NodeConformance] [Conformance]", Outcome: conformance.Passed},
		{Name: "[sig-storage] EmptyDir volumes should support (root,0644,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]", Outcome: conformance.Passed},
		{Name: "[sig-storage] EmptyDir volumes when FSGroup is specified [LinuxOnly] new files should be created with FSGroup ownership when container is root", Outcome: conformance.Passed},
		{Name: "[sig-storage] HostPath should support r/w [NodeConformance]", Outcome: conformance.Skipped},
		{Name: "[sig-node] [DRA] CRUD Tests resource.k8s.io/v1 DeviceClass [Conformance] [sig-node, DRA, Conformance]", Outcome: conformance.Passed},
		{Name: "[SynchronizedAfterSuite]", Outcome: conformance.Failed},
	}
	got := conformance.Areas(results)
	want := []conformance.Area{
		{Name: "[SynchronizedAfterSuite]", Summary: conformance.Summary{Failed: 1}},
		{Name: "[sig-node] Container Lifecycle Hook", Summary: conformance.Summary{Passed: 1, Failed: 1}},
		{Name: "[sig-node] Security Context", Summary: conformance.Summary{Passed: 1}},
		{Name: "[sig-node] [DRA] CRUD Tests", Summary: conformance.Summary{Passed: 1}},
		{Name: "[sig-storage] EmptyDir", Summary: conformance.Summary{Passed: 2}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("areas (-want +got):\n%s", diff)
	}
	var b strings.Builder
	if err := conformance.WriteAreas(&b, got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| [sig-node] Container Lifecycle Hook | 2 | 1 | 1 |\n") || !strings.HasSuffix(b.String(), "| all | 7 | 5 | 2 |\n") {
		t.Errorf("areas table:\n%s", b.String())
	}
}
