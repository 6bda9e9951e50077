package syncer_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

const privateImage = "registry.example:5000/private/app:v1"

// privateRegistry is the fake runtime's image service behind a registry
// whose private/ repositories need the user puller with password s3cret.
type privateRegistry struct {
	*enginetest.FakeRuntime
}

func (r privateRegistry) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	if strings.Contains(image.GetImage(), "/private/") && (auth.GetUsername() != "puller" || auth.GetPassword() != "s3cret") {
		return "", errors.New("failed to pull and unpack image: 401 Unauthorized")
	}
	return r.FakeRuntime.PullImage(ctx, image, auth, sb)
}

// tenantPod is a pod of namespace running privateImage (IfNotPresent) with
// an image pull Secret holding password, or none when empty.
func tenantPod(h *syncertest.Harness, namespace, secret, password string) *corev1.Pod {
	pod := enginetest.Pod()
	pod.Namespace, pod.Name, pod.UID = namespace, "app", types.UID("uid-"+namespace)
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Containers[0].Image = privateImage
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	if password != "" {
		pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: secret}}
		auth := base64.StdEncoding.EncodeToString([]byte("puller:" + password))
		h.In.Secrets = append(h.In.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secret},
			Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example:5000":{"auth":"` + auth + `"}}}`)}})
	}
	return pod
}

// TestPresentImagesAreVerified: an image the node pulled with team-a's
// credentials is run by another pod only if that pod could pull it
// itself, as the kubelet does by default since v1.35
// (KubeletEnsureSecretPulledImages): team-b without credentials, or with
// wrong ones, pulls and fails (it ran team-a's private image with none);
// with the same credentials under another Secret it runs without a pull;
// with pull policy Never it is refused as not present. The other policies
// open what they say.
func TestPresentImagesAreVerified(t *testing.T) {
	start := []string{"CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0"}
	for _, tc := range []struct {
		name   string
		verify syncer.ImagePullVerification
		// teamB is team-b's pod, given the harness.
		teamB func(h *syncertest.Harness) *corev1.Pod
		want  []string
	}{
		{"no credentials", syncer.ImagePullVerification{}, func(h *syncertest.Harness) *corev1.Pod { return tenantPod(h, "team-b", "", "") },
			[]string{"PullImage " + privateImage + " !ErrImagePull", "StartContainer app !ErrImagePull"}},
		{"wrong credentials", syncer.ImagePullVerification{}, func(h *syncertest.Harness) *corev1.Pod { return tenantPod(h, "team-b", "mine", "guess") },
			[]string{"PullImage " + privateImage + " !ErrImagePull", "StartContainer app !ErrImagePull"}},
		{"the same credentials in another Secret", syncer.ImagePullVerification{}, func(h *syncertest.Harness) *corev1.Pod {
			return tenantPod(h, "team-b", "copy", "s3cret")
		}, []string{"StartContainer app NewSandbox"}},
		{"pull policy Never", syncer.ImagePullVerification{}, func(h *syncertest.Harness) *corev1.Pod {
			p := tenantPod(h, "team-b", "", "")
			p.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
			return p
		}, []string{"StartContainer app !ErrImageNeverPull"}},
		{"NeverVerify", syncer.ImagePullVerification{Policy: syncer.NeverVerify}, func(h *syncertest.Harness) *corev1.Pod { return tenantPod(h, "team-b", "", "") },
			[]string{"StartContainer app NewSandbox"}},
		{"allowlisted", syncer.ImagePullVerification{Policy: syncer.NeverVerifyAllowlistedImages, Allowlist: []string{"registry.example:5000/private/*"}},
			func(h *syncertest.Harness) *corev1.Pod { return tenantPod(h, "team-b", "", "") }, []string{"StartContainer app NewSandbox"}},
		{"not allowlisted", syncer.ImagePullVerification{Policy: syncer.NeverVerifyAllowlistedImages, Allowlist: []string{"registry.example:5000/public/*"}},
			func(h *syncertest.Harness) *corev1.Pod { return tenantPod(h, "team-b", "", "") },
			[]string{"PullImage " + privateImage + " !ErrImagePull", "StartContainer app !ErrImagePull"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := syncertest.New(t, func(o *syncer.SyncerOptions) {
				o.Images = privateRegistry{o.Runtime.(*enginetest.FakeRuntime)}
				o.ImagePullVerification = tc.verify
			})
			syncertest.WantSteps(t, h.Sync(tenantPod(h, "team-a", "regcred", "s3cret")), append(start, "PullImage "+privateImage, "StartContainer app NewSandbox")...)
			syncertest.WantSteps(t, h.Sync(tc.teamB(h)), append(start, tc.want...)...)
		})
	}
}

// TestPreloadedImagesAreVerifiedAsThePolicySays: an image the node holds
// but did not pull (imported, preloaded) runs without a check by default
// (NeverVerifyPreloadedImages), and is pulled first under AlwaysVerify.
func TestPreloadedImagesAreVerifiedAsThePolicySays(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   []string
	}{
		{syncer.NeverVerifyPreloadedImages, []string{"StartContainer app NewSandbox"}},
		{syncer.AlwaysVerify, []string{"PullImage " + enginetest.Image, "StartContainer app NewSandbox"}},
	} {
		h := syncertest.New(t, func(o *syncer.SyncerOptions) { o.ImagePullVerification.Policy = tc.policy })
		pod := enginetest.Pod()
		pod.Spec.Containers = pod.Spec.Containers[:1]
		pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
		syncertest.WantSteps(t, h.Sync(pod), append([]string{"CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0"}, tc.want...)...)
	}
}
