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
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// TestPodSecurityLevels: the node's Pod Security level as an API caller
// meets it. Under the default level, baseline, a pod adding SYS_ADMIN is
// refused with the PodSecurity message and nothing is created; under
// --pod-security=restricted a plain pod is refused for each thing the
// level asks, and one that has them runs.
func TestPodSecurityLevels(t *testing.T) {
	ctx := testContext(t)
	rs := runtimeClient(t)
	syncPod := func(t *testing.T, d *podsyncd, pod *corev1.Pod) (string, error) {
		t.Helper()
		return d.grpcurl(ctx, requestJSON(t, &podsyncv1.SyncPodRequest{Pod: podToProto(t, pod)}), nil, "podsync.v1.PodSyncService/SyncPod")
	}
	refused := func(t *testing.T, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatal("SyncPod succeeded, want a refusal")
		}
		for _, w := range append([]string{"FailedPrecondition", "PodSecurity"}, want...) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("grpcurl's error does not say %q:\n%v", w, err)
			}
		}
	}

	t.Run("baseline refuses SYS_ADMIN", func(t *testing.T) {
		d := startPodsyncd(t, daemonOptions{})
		c := sleeper("app")
		c.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
		pod := newCorePod(t, "", c)
		_, err := syncPod(t, d, pod)
		refused(t, err, `violates PodSecurity "baseline:latest"`, "non-default capabilities", "SYS_ADMIN", "--allowed-capabilities")
		if ready, notReady := sandboxesOf(ctx, t, rs, string(pod.UID)); len(ready)+len(notReady) != 0 {
			t.Errorf("sandboxes created for the refused pod: %v %v", ready, notReady)
		}
	})

	t.Run("restricted", func(t *testing.T) {
		d := startPodsyncd(t, daemonOptions{Args: []string{"--pod-security=restricted"}})
		plain := newCorePod(t, "plain", sleeper("app"))
		_, err := syncPod(t, d, plain)
		refused(t, err, `violates PodSecurity "restricted:latest"`, "allowPrivilegeEscalation != false", "unrestricted capabilities",
			"runAsNonRoot != true", "seccompProfile")
		if ready, notReady := sandboxesOf(ctx, t, rs, string(plain.UID)); len(ready)+len(notReady) != 0 {
			t.Errorf("sandboxes created for the refused pod: %v %v", ready, notReady)
		}

		c := sleeper("app")
		c.SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
		ok := newCorePod(t, "ok", c)
		ok.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(1000)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		out, err := syncPod(t, d, ok)
		if err != nil {
			t.Fatal(err)
		}
		msgs := decodeStream(t, out, func() *podsyncv1.SyncPodResponse { return &podsyncv1.SyncPodResponse{} })
		res := msgs[len(msgs)-1].GetResult()
		if res.GetStatus().GetPhase() != "Running" {
			t.Fatalf("restricted pod: phase %q, want Running:\n%s", res.GetStatus().GetPhase(), out)
		}
		wantSeccompFilter(ctx, t, rs, res.GetStatus().GetContainerStatuses()[0].GetContainerId())
	})

	// An update gets every check of a new pod: on a runtime without user
	// namespaces (containerd 1.6) an update of a compliant running pod
	// to hostUsers false and runAsUser 0 — which the restricted level
	// allows in a user namespace — is refused, and the container keeps
	// running as uid 1000 (it ran as uid 0 with no user namespace); on a
	// runtime with them the update runs in one.
	t.Run("restricted update to hostUsers false", func(t *testing.T) {
		d := startPodsyncd(t, daemonOptions{Args: []string{"--pod-security=restricted"}})
		c := sleeper("app")
		c.SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
		pod := newCorePod(t, "", c)
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(1000)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		if _, err := syncPod(t, d, pod); err != nil {
			t.Fatal(err)
		}
		uid := func() string {
			t.Helper()
			resp, err := d.client().ExecSync(ctx, &podsyncv1.ExecSyncRequest{Namespace: pod.Namespace, Name: pod.Name, Command: []string{"id", "-u"}})
			if err != nil {
				t.Fatalf("ExecSync id -u: %v", err)
			}
			return strings.TrimSpace(string(resp.GetStdout()))
		}
		if got := uid(); got != "1000" {
			t.Fatalf("the compliant pod runs as uid %s, want 1000", got)
		}
		update := pod.DeepCopy()
		update.Spec.HostUsers = ptr.To(false)
		update.Spec.SecurityContext.RunAsNonRoot = nil
		update.Spec.SecurityContext.RunAsUser = ptr.To(int64(0))
		stream, err := d.client().SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: podToProto(t, update)})
		if err == nil {
			for err == nil {
				_, err = stream.Recv()
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
		}
		supported := d.logHas(`"runtime features"`, `"userNamespaces":true`)
		if !supported {
			if status.Code(err) != codes.FailedPrecondition || errorReason(err) != "UserNamespacesUnsupported" {
				t.Fatalf("update to hostUsers false on a runtime without user namespaces: %v; want FAILED_PRECONDITION UserNamespacesUnsupported", err)
			}
			if got := uid(); got != "1000" {
				t.Errorf("after the refused update the pod runs as uid %s, want 1000", got)
			}
			return
		}
		if err != nil {
			t.Fatalf("update to hostUsers false on a runtime with user namespaces: %v", err)
		}
		resp, err := d.client().ExecSync(ctx, &podsyncv1.ExecSyncRequest{Namespace: pod.Namespace, Name: pod.Name, Command: []string{"cat", "/proc/self/uid_map"}})
		if err != nil || strings.Fields(string(resp.GetStdout()))[1] == "0" {
			t.Errorf("uid_map after the update: %q %v, want uid 0 mapped to another host uid", resp.GetStdout(), err)
		}
	})
}
