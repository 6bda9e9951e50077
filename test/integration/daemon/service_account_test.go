//go:build integration

package daemon_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// TestServiceAccountNameThroughTheAPI: a pod's serviceAccountName reaches
// podsyncd, is what GetPod returns and what an env fieldRef of
// spec.serviceAccountName gives the container; a pod that names no
// account gets "default", as on a cluster whose ServiceAccount admission
// names it.
func TestServiceAccountNameThroughTheAPI(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	rs := runtimeClient(t)

	for _, tc := range []struct{ suffix, account, want string }{
		{"named", "builder", "builder"},
		{"unnamed", "", "default"},
	} {
		c := sleeper("app")
		c.Env = []corev1.EnvVar{{Name: "ACCOUNT", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}}}
		pod := newCorePod(t, tc.suffix, c)
		pod.Spec.ServiceAccountName = tc.account
		st := d.syncPod(ctx, t, pod).GetStatus()
		id := strings.TrimPrefix(st.GetContainerStatuses()[0].GetContainerId(), "containerd://")
		out, stderr, err := rs.ExecSync(ctx, id, []string{"sh", "-c", `echo "$ACCOUNT"`}, 30*time.Second)
		if err != nil {
			t.Fatalf("%s: exec echo $ACCOUNT: %v (%s)", pod.Name, err, stderr)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("%s: ACCOUNT = %q, want %q", pod.Name, got, tc.want)
		}
		got, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: pod.Namespace, Name: pod.Name})
		if err != nil {
			t.Fatal(err)
		}
		if n := got.GetPod().GetSpec().GetServiceAccountName(); n != tc.account {
			t.Errorf("%s: GetPod's serviceAccountName = %q, want %q", pod.Name, n, tc.account)
		}
		if _, err := d.client().DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: pod.Namespace, Name: pod.Name}); err != nil {
			t.Fatal(err)
		}
		if err := removePodCgroups(string(pod.UID)); err != nil {
			t.Error(err)
		}
	}
}
