package vk

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// The node library's "provider took the pod" events are dropped; its
// failures, and any other event, reach the API server.
func TestNodeLibraryRecorderDropsSuccessEvents(t *testing.T) {
	fake := record.NewFakeRecorder(10)
	r := nodeLibraryRecorder{fake}
	pod := &corev1.Pod{}
	r.Event(pod, corev1.EventTypeNormal, "ProviderCreateSuccess", "Create pod in provider successfully")
	r.Eventf(pod, corev1.EventTypeNormal, "ProviderUpdateSuccess", "Update pod in provider %s", "successfully")
	r.AnnotatedEventf(pod, nil, corev1.EventTypeNormal, "ProviderDeleteSuccess", "Delete pod in provider successfully")
	r.Event(pod, corev1.EventTypeWarning, "ProviderCreateFailed", "rpc error: code = FailedPrecondition")
	r.Eventf(pod, corev1.EventTypeNormal, "Pulled", "image %s present", "pause")
	r.AnnotatedEventf(pod, nil, corev1.EventTypeWarning, "ProviderDeleteFailed", "deadline exceeded")
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	want := []string{"Warning ProviderCreateFailed rpc error: code = FailedPrecondition", "Normal Pulled image pause present",
		"Warning ProviderDeleteFailed deadline exceeded"}
	if len(got) != len(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d %q, want %q", i, got[i], want[i])
		}
	}
}
