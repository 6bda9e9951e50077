//go:build integration

package engine_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/internal/testing/localcri"
)

func TestImagePullNeverWithMissingImage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	pod.Spec.Containers[0].Image = "registry.local/absent:none"
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	for range 2 {
		res := e.sync(pod)
		if !hasStep(res, syncer.ActionStartContainer, "app", "!"+syncer.ReasonErrImageNeverPull) {
			t.Fatalf("steps %v, want ErrImageNeverPull", steps(res.Steps))
		}
		st := res.Step(syncer.ActionStartContainer, "app")
		if !strings.Contains(st.Message, `Container image "registry.local/absent:none" is not present with pull policy of Never`) {
			t.Errorf("message %q", st.Message)
		}
		if res.Step(syncer.ActionPullImage, pod.Spec.Containers[0].Image) != nil {
			t.Error("an image with pull policy Never was pulled")
		}
	}
}

func TestImagePullAlwaysFromLocalRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := e.newPod("app")
	ref := inst.Registry().Ref("busybox:local")
	pod.Spec.Containers[0].Image = ref
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	before := inst.Registry().Requests().Manifests
	res := e.until(pod, "running", e.running(pod))
	if s := res.Step(syncer.ActionPullImage, ref); s == nil || s.Err != nil {
		t.Fatalf("steps %v, want a successful pull of %s", steps(res.Steps), ref)
	}
	if after := inst.Registry().Requests().Manifests; after <= before {
		t.Errorf("registry manifest requests %d → %d: the image was not pulled from it", before, after)
	}
	if cs := e.status(pod, res).ContainerStatuses[0]; cs.Image != ref || !strings.HasPrefix(cs.ImageID, "sha256:") && !strings.Contains(cs.ImageID, "@sha256:") {
		t.Errorf("status image %q id %q", cs.Image, cs.ImageID)
	}
	// Always pulls again for every start.
	old := newest(t, res, "app")
	localcritest.Crictl(t, inst, "stop", old.ID)
	res = e.until(pod, "restarted", func(r syncer.SyncResult) bool { return newest(t, r, "app").ID != old.ID })
	if s := res.Step(syncer.ActionPullImage, ref); s == nil || s.Err != nil {
		t.Errorf("restart steps %v, want another pull", steps(res.Steps))
	}
}

// TestFailingRegistry is not parallel: it makes the shared registry fail.
func TestFailingRegistry(t *testing.T) {
	const base = time.Second
	e := newEnv(t, func(o *syncer.SyncerOptions) { o.Backoff = plan.BackoffPolicy{Base: base} })
	imgs, err := localcri.LayoutImages(inst.Images().Layout)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	tag := "fresh-" + hex.EncodeToString(b) + ":v1"
	if err := inst.Registry().Push(e.ctx, tag, imgs[localcri.BusyboxImage]); err != nil {
		t.Fatal(err)
	}
	reg := inst.Registry()
	reg.FailManifests(http.StatusInternalServerError)
	t.Cleanup(reg.Reset)

	pod := e.newPod("app")
	ref := reg.Ref(tag)
	pod.Spec.Containers[0].Image = ref
	res := e.sync(pod)
	if !hasStep(res, syncer.ActionPullImage, ref, "!"+podstatus.ReasonErrImagePull) || !hasStep(res, syncer.ActionStartContainer, "app", "!"+podstatus.ReasonErrImagePull) {
		t.Fatalf("first pass %v, want ErrImagePull", steps(res.Steps))
	}
	res = e.sync(pod)
	st := res.Step(syncer.ActionStartContainer, "app")
	if st == nil || st.Reason != plan.ReasonImagePullBackOff || st.NextRetry.IsZero() || st.Err != nil {
		t.Fatalf("second pass %v, want ImagePullBackOff with a next retry", steps(res.Steps))
	}
	if !strings.Contains(st.Message, "Back-off pulling image") {
		t.Errorf("back-off message %q", st.Message)
	}
	if cs := e.status(pod, res).ContainerStatuses[0]; cs.State.Waiting == nil || cs.State.Waiting.Reason != plan.ReasonImagePullBackOff {
		t.Errorf("status %+v, want waiting in ImagePullBackOff", cs.State)
	}

	// Once the registry answers, the pull after the back-off succeeds.
	reg.Reset()
	res = e.until(pod, "running", e.running(pod))
	if s := res.Step(syncer.ActionPullImage, ref); s == nil || s.Err != nil {
		t.Errorf("steps %v, want a successful pull", steps(res.Steps))
	}
	if len(res.View.PullFailures) != 0 {
		t.Errorf("pull failures after success: %+v", res.View.PullFailures)
	}
}

// TestPresentPrivateImageIsVerified: on containerd, a private image a pod
// of team-a pulled with its Secret is run by another pod of the node only
// if that pod can pull it itself (KubeletEnsureSecretPulledImages): one
// without credentials, with pull policy IfNotPresent, pulls and fails with
// ErrImagePull (it ran the image with none), one with the same
// credentials runs without a pull.
func TestPresentPrivateImageIsVerified(t *testing.T) {
	t.Parallel()
	reg := inst.Registry()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "verified-" + hex.EncodeToString(b) + "/"
	reg.RequireBasicAuth(prefix, "puller", "s3cret")
	imgs, err := localcri.LayoutImages(inst.Images().Layout)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	if err := reg.Push(e.ctx, prefix+"busybox:v1", imgs[localcri.BusyboxImage]); err != nil {
		t.Fatal(err)
	}
	ref := reg.Ref(prefix + "busybox:v1")
	auth := base64.StdEncoding.EncodeToString([]byte("puller:s3cret"))
	regcred := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: namespace}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + reg.Addr() + `":{"auth":"` + auth + `"}}}`)}}
	pod := func(secret bool) *corev1.Pod {
		p := e.newPod("app")
		p.Spec.Containers[0].Image = ref
		p.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
		if secret {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		}
		return p
	}
	e.in.Secrets = []*corev1.Secret{regcred}
	owner := pod(true)
	e.until(owner, "running", e.running(owner))

	e.in.Secrets = nil
	other := pod(false)
	res := e.sync(other)
	st := res.Step(syncer.ActionPullImage, ref)
	if st == nil || st.Reason != podstatus.ReasonErrImagePull {
		t.Fatalf("a pod without credentials: steps %v, want a failed pull (ErrImagePull), not a start of the image the node holds", steps(res.Steps))
	}
	if cs := e.status(other, res).ContainerStatuses[0]; cs.State.Running != nil {
		t.Errorf("the pod without credentials runs the private image")
	}

	e.in.Secrets = []*corev1.Secret{regcred}
	same := pod(true)
	res = e.until(same, "running", e.running(same))
	if st := res.Step(syncer.ActionPullImage, ref); st != nil {
		t.Errorf("a pod with the credentials that pulled the image pulled it again: %v", steps(res.Steps))
	}
}
