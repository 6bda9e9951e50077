//go:build integration

package daemon_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// TestPodForAnotherOS: a pod for Windows is valid, as on the API server,
// and the Linux node refuses it at admission as a Linux kubelet does —
// FAILED_PRECONDITION with the kubelet's reason and message
// (node-conformance's PodOSRejection test waits for PodOSNotSupported) —
// and creates nothing for it; so it does with a pod labelled
// kubernetes.io/os for Windows.
func TestPodForAnotherOS(t *testing.T) {
	ctx := testContext(t)
	rs := runtimeClient(t)
	d := startPodsyncd(t, daemonOptions{})
	for _, tc := range []struct {
		name, reason, message string
		mutate                func(*corev1.Pod)
	}{
		{"spec.os", "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS",
			func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} }},
		{"label", "PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
			func(p *corev1.Pod) { p.Labels = map[string]string{corev1.LabelOSStable: "windows"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newCorePod(t, "", sleeper("app"))
			tc.mutate(pod)
			stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: podToProto(t, pod)})
			for err == nil {
				_, err = stream.Recv()
			}
			if errors.Is(err, io.EOF) {
				t.Fatal("SyncPod of a pod for Windows succeeded, want a refusal")
			}
			if status.Code(err) != codes.FailedPrecondition || errorReason(err) != tc.reason || !strings.Contains(status.Convert(err).Message(), tc.reason+": "+tc.message) {
				t.Fatalf("SyncPod: %v; want FAILED_PRECONDITION %s %q", err, tc.reason, tc.message)
			}
			if ready, notReady := sandboxesOf(ctx, t, rs, string(pod.UID)); len(ready)+len(notReady) != 0 {
				t.Errorf("sandboxes created for the refused pod: %v %v", ready, notReady)
			}
		})
	}
}
