//go:build integration

package engine_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
)

// TestRuntimeClassName: runtimeClassName is the runtime handler the
// sandbox runs with, on containerd: "runc", the handler the test runtime
// configures, runs the pod and containerd reports it as the sandbox's;
// a handler containerd does not have fails the sandbox's creation with
// the kubelet's message around containerd's error, and the pod stays
// Pending, as on a kubelet whose runtime lacks the RuntimeClass's handler
// (node-conformance's "unconfigured handler" test).
func TestRuntimeClassName(t *testing.T) {
	t.Parallel()
	t.Run("configured", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		pod := e.newPod("app")
		pod.Spec.RuntimeClassName = ptr.To("runc")
		res := e.until(pod, "running", e.running(pod))
		st, err := e.rt.PodSandboxStatus(e.ctx, res.SandboxID, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.GetStatus().GetRuntimeHandler(); got != "runc" {
			t.Errorf("sandbox's runtime handler %q, want runc", got)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		pod := e.newPod("app")
		pod.Spec.RuntimeClassName = ptr.To("podsync-no-such-handler")
		for range 2 {
			res := e.sync(pod)
			st := res.Step(syncer.ActionCreatePodSandbox, model.PodString(pod))
			if st == nil || st.Err == nil || st.Reason != "CreatePodSandboxError" ||
				!strings.HasPrefix(st.Message, "Failed to create sandbox for pod") || !strings.Contains(st.Message, "podsync-no-such-handler") {
				t.Fatalf("sandbox step %+v, want CreatePodSandboxError naming the handler", st)
			}
			if phase := e.status(pod, res).Phase; phase != corev1.PodPending {
				t.Errorf("phase %s, want Pending", phase)
			}
		}
	})
}
