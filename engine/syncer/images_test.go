package syncer_test

import (
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

func TestPullPolicies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		image  string
		policy corev1.PullPolicy
		want   []string
	}{
		{"IfNotPresent and present", enginetest.Image, corev1.PullIfNotPresent, []string{"StartContainer app NewSandbox"}},
		{"IfNotPresent and absent", "registry.local/other:1", corev1.PullIfNotPresent,
			[]string{"PullImage registry.local/other:1", "StartContainer app NewSandbox"}},
		{"Always and present", enginetest.Image, corev1.PullAlways, []string{"PullImage " + enginetest.Image, "StartContainer app NewSandbox"}},
		{"Never and present", enginetest.Image, corev1.PullNever, []string{"StartContainer app NewSandbox"}},
		{"Never and absent", "registry.local/other:1", corev1.PullNever, []string{"StartContainer app !ErrImageNeverPull"}},
		{"default for latest is Always", "registry.local/other", "", []string{"PullImage registry.local/other", "StartContainer app NewSandbox"}},
		{"default for a tag is IfNotPresent", enginetest.Image, "", []string{"StartContainer app NewSandbox"}},
		{"invalid reference", "Registry.local/UPPER:1", corev1.PullAlways, []string{"StartContainer app !InvalidImageName"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := syncertest.New(t)
			pod := enginetest.Pod()
			pod.Spec.Containers = pod.Spec.Containers[:1]
			pod.Spec.Containers[0].Image = tc.image
			pod.Spec.Containers[0].ImagePullPolicy = tc.policy
			res := h.Sync(pod)
			syncertest.WantSteps(t, res, append([]string{"CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0"}, tc.want...)...)
			if st := res.Step(syncer.ActionStartContainer, "app"); st.Reason == syncer.ReasonErrImageNeverPull {
				if !errors.Is(st.Err, errdefs.ErrNotFound) || !strings.Contains(st.Message, "is not present with pull policy of Never") {
					t.Errorf("never-pull step %+v, want ErrNotFound and the kubelet's message", st)
				}
				// Never-pull is not a pull failure: no back-off follows.
				syncertest.WantSteps(t, h.Sync(pod), "ConfigPodSandbox #0", "StartContainer app !ErrImageNeverPull")
			}
		})
	}
}

func TestImageInContainerStatus(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers[0].Image = "registry.local/other:1"
	res := h.Sync(pod)
	st := h.S.PodStatus(pod, res.View, model.ProbeResults{})
	if cs := st.ContainerStatuses[0]; cs.Image != "registry.local/other:1" || cs.ImageID != "registry.local/other:1" {
		t.Errorf("status enginetest.Image %q id %q, want the pulled enginetest.Image and its ref", cs.Image, cs.ImageID)
	}
}

func TestPullSecrets(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Containers[0].Image = "registry.example:5000/team/app:1"
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "missing"}, {Name: "regcred"}}
	h.In.Secrets = []*corev1.Secret{{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "shop"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{` +
			`"https://registry.example:5000/other":{"username":"no","password":"no"},` +
			`"registry.example:5000/team":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("bob:pw")) + `"}}}`)},
	}}
	h.Sync(pod)
	h.RT.Images.AssertImagePulledWithAuth(t, &runtimeapi.ImageSpec{
		Image: "registry.example:5000/team/app:1", UserSpecifiedImage: "registry.example:5000/team/app:1",
	}, &runtimeapi.AuthConfig{Username: "bob", Password: "pw"}, "pull with the matching credential")
}

// TestPullWithNodeCredentials: the node's credentials (--image-credentials)
// are tried after the pod's Secrets', as the kubelet's union keyring: a
// pull refused with the Secret's is retried with the node's, and the
// errors of all of them are reported when every one fails.
func TestPullWithNodeCredentials(t *testing.T) {
	node := &syncer.Keyring{}
	node.Add(syncer.DockerConfig{"registry.example:5000": {Username: "node", Password: "n"}})
	h := syncertest.New(t, func(o *syncer.SyncerOptions) { o.Credentials = node })
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Containers[0].Image = "registry.example:5000/team/app:1"
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	h.In.Secrets = []*corev1.Secret{{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "shop"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example:5000":{"username":"pod","password":"p"}}}`)},
	}}
	// The first pull, with the Secret's credential, is refused.
	h.RT.Images.InjectError("PullImage", errors.New("failed to pull: 401 Unauthorized"))
	h.Sync(pod)
	if n := strings.Count(strings.Join(h.RT.Images.Called, ","), "PullImage"); n != 2 {
		t.Errorf("%d pulls, want the Secret's then the node's", n)
	}
	h.RT.Images.AssertImagePulledWithAuth(t, &runtimeapi.ImageSpec{
		Image: "registry.example:5000/team/app:1", UserSpecifiedImage: "registry.example:5000/team/app:1",
	}, &runtimeapi.AuthConfig{Username: "node", Password: "n"}, "pull with the node's credential")
}

func TestPullFailuresAreForgottenWithTheImage(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Containers[0].Image = "registry.local/other:1"
	h.RT.InjectError("PullImage", errors.New("manifest unknown"))
	res := h.Sync(pod)
	if len(res.View.PullFailures) != 1 || res.View.PullFailures[0].Failures != 1 {
		t.Fatalf("pull failures %+v, want one", res.View.PullFailures)
	}
	// Another enginetest.Image is pulled at once, without back-off.
	pod = pod.DeepCopy()
	pod.Spec.Containers[0].Image = "registry.local/other:2"
	res = h.Sync(pod)
	if got := syncertest.Summary(res.Steps); !slices.Contains(got, "StartContainer app NotStarted") || len(res.View.PullFailures) != 0 {
		t.Errorf("steps %v pull failures %+v, want a start and no failures", got, res.View.PullFailures)
	}
}

// TestStartReportsAnImageAlreadyPresent: a start whose image was present
// and not pulled says so, for the kubelet's "already present on machine"
// Pulled event; a pulled or missing image does not.
func TestStartReportsAnImageAlreadyPresent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		image  string
		policy corev1.PullPolicy
		want   bool
	}{
		{"IfNotPresent and present", enginetest.Image, corev1.PullIfNotPresent, true},
		{"Never and present", enginetest.Image, corev1.PullNever, true},
		{"Always and present is pulled", enginetest.Image, corev1.PullAlways, false},
		{"IfNotPresent and absent is pulled", "registry.local/other:1", corev1.PullIfNotPresent, false},
		{"Never and absent", "registry.local/other:1", corev1.PullNever, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := syncertest.New(t)
			pod := enginetest.Pod()
			pod.Spec.Containers = pod.Spec.Containers[:1]
			pod.Spec.Containers[0].Image = tc.image
			pod.Spec.Containers[0].ImagePullPolicy = tc.policy
			st := h.Sync(pod).Step(syncer.ActionStartContainer, "app")
			if st == nil || st.ImagePresent != tc.want {
				t.Errorf("start step %+v, want ImagePresent %v", st, tc.want)
			}
		})
	}
}

// TestPullBackOffIsSharedByThePodsContainersOfAnImage: the kubelet keys
// the image-pull back-off by pod UID and image, so a failed pull holds
// back every container of the pod with that image, in the same pass and
// after, while a container of another image pulls.
func TestPullBackOffIsSharedByThePodsContainersOfAnImage(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	const missing = "registry.local/other:1"
	pod.Spec.Containers[0].Image = missing
	pod.Spec.Containers[1].Image = missing
	pod.Spec.Containers = append(pod.Spec.Containers, enginetest.Container("third", enginetest.RunForever...))
	pod.Spec.Containers[2].Image = "registry.local/third:1"
	h.RT.InjectError("PullImage", errors.New("manifest unknown"))
	res := h.Sync(pod)
	syncertest.WantSteps(t, res,
		"CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0",
		"PullImage "+missing+" !ErrImagePull", "StartContainer app !ErrImagePull",
		"StartContainer helper ImagePullBackOff",
		"PullImage registry.local/third:1", "StartContainer third NewSandbox",
	)
	want := `Back-off pulling image "` + missing + `": ErrImagePull: manifest unknown`
	if st := res.Step(syncer.ActionStartContainer, "helper"); st.Message != want || !st.NextRetry.Equal(h.Clock.Now().Add(plan.DefaultBackoffBase)) {
		t.Errorf("helper's back-off %q until %s, want %q until the base delay from now", st.Message, st.NextRetry, want)
	}
	if len(res.PullFailures) != 1 || res.PullFailures[0].Image != missing || res.PullFailures[0].Failures != 1 {
		t.Errorf("pull failures %+v, want one failure of %s", res.PullFailures, missing)
	}
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "StartContainer app ImagePullBackOff", "StartContainer helper ImagePullBackOff")
	for _, cs := range h.S.PodStatus(pod, res.View, model.ProbeResults{}).ContainerStatuses[:2] {
		if w := cs.State.Waiting; w == nil || w.Reason != plan.ReasonImagePullBackOff || w.Message != want {
			t.Errorf("%s waiting %+v, want ImagePullBackOff with %q", cs.Name, w, want)
		}
	}
	h.Clock.Step(plan.DefaultBackoffBase)
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "ConfigPodSandbox #0", "PullImage "+missing, "StartContainer app NotStarted", "StartContainer helper NotStarted")
}
