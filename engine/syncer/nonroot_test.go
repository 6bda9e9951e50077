package syncer_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// TestRunAsNonRootIsEnforced: a container that must not run as root but
// would — runAsUser 0, or no runAsUser and an image whose user is root or
// a name — fails its start with CreateContainerConfigError and the
// kubelet's message, and is never created; one whose image runs as a
// numeric non-root user starts.
func TestRunAsNonRootIsEnforced(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sc       *corev1.SecurityContext
		imageUID *int64
		imageUsr string
		message  string // empty: starts
	}{
		{name: "runAsUser 0", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(0))},
			message: "container's runAsUser breaks non-root policy"},
		{name: "image without a user runs as root", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			message: "container has runAsNonRoot and image will run as root"},
		{name: "image user 0", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, imageUID: ptr.To(int64(0)),
			message: "container has runAsNonRoot and image will run as root"},
		{name: "image user name", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, imageUsr: "nobody",
			message: "image has non-numeric user (nobody)"},
		{name: "image user 1000", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, imageUID: ptr.To(int64(1000))},
		{name: "runAsUser 1000 over a root image", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(1000))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := syncertest.New(t)
			img := h.RT.Images.Images[enginetest.Image]
			if tc.imageUID != nil {
				img.Uid = &runtimeapi.Int64Value{Value: *tc.imageUID}
			}
			img.Username = tc.imageUsr
			pod := enginetest.Pod()
			pod.Spec.Containers = pod.Spec.Containers[:1]
			pod.Spec.Containers[0].SecurityContext = tc.sc
			res := h.Sync(pod)
			if tc.message == "" {
				syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0", "StartContainer app NewSandbox")
				return
			}
			st := syncertest.FailedStep(t, res, syncer.ActionStartContainer, "app")
			if st.Reason != syncer.ReasonCreateContainerConfigErr || !strings.Contains(st.Message, tc.message) ||
				!strings.Contains(st.Message, `(pod: "web_shop(uid-1)", container: app)`) {
				t.Errorf("step %s %q, want %s with %q", st.Reason, st.Message, syncer.ReasonCreateContainerConfigErr, tc.message)
			}
			if n := len(h.CriContainers()); n != 0 {
				t.Errorf("%d containers created, want none", n)
			}
		})
	}
}
