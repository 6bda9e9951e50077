package engine_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// waitingReason is the waiting reason of the pod's container name in st.
func waitingReason(st corev1.PodStatus, name string) string {
	for _, cs := range st.ContainerStatuses {
		if cs.Name == name && cs.State.Waiting != nil {
			return cs.State.Waiting.Reason
		}
	}
	return ""
}

func running(st corev1.PodStatus, name string) bool {
	for _, cs := range st.ContainerStatuses {
		if cs.Name == name && cs.State.Running != nil {
			return true
		}
	}
	return false
}

// TestNodePodWaitsForAMissingObject: a pod whose env refers to a Secret
// the node does not store waits with CreateContainerConfigError, one
// whose volume does waits with a FailedMount; applying the objects alone
// (no apply of the pods) starts both.
func TestNodePodWaitsForAMissingObject(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	env := enginetest.Pod()
	env.Spec.Containers = env.Spec.Containers[:1]
	env.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "t"}}}}
	if got := waitingReason(h.apply(env).Status, "app"); got != syncer.ReasonCreateContainerConfigErr {
		t.Fatalf("env of a missing Secret: %q, want CreateContainerConfigError", got)
	}

	vol := enginetest.Pod()
	vol.Name, vol.UID = "vol", "uid-vol"
	vol.Spec.Containers = vol.Spec.Containers[:1]
	vol.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}
	vol.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}}
	res := h.apply(vol)
	if running(res.Status, "app") {
		t.Fatal("a pod whose ConfigMap volume cannot be set up runs")
	}
	if !slices.ContainsFunc(res.Steps, func(s syncer.StepResult) bool { return s.Reason == syncer.ReasonFailedMount }) {
		t.Errorf("steps %v hold no FailedMount", res.Steps)
	}
	if got := waitingReason(res.Status, "app"); got != "ContainerCreating" {
		t.Errorf("pod whose volume cannot be set up: waiting %q, want ContainerCreating", got)
	}
	if !slices.Contains(h.events(vol), engine.EventFailedMount) {
		t.Errorf("events %v, want FailedMount", h.events(vol))
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "token"}, Data: map[string][]byte{"t": []byte("s3cret")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: vol.Namespace, Name: "cfg"}, Data: map[string]string{"a.conf": "one"}}
	if _, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts([]*corev1.ConfigMap{cm}, []*corev1.Secret{secret}), ""); err != nil {
		t.Fatal(err)
	}
	h.eventually("both pods run", func() bool {
		return running(h.storedStatus(env), "app") && running(h.storedStatus(vol), "app")
	})
	data, err := os.ReadFile(filepath.Join(criconfig.VolumeDir(vol, criconfig.VolumePluginConfigMap, "cfg", h.cfg), "a.conf"))
	if err != nil || string(data) != "one" {
		t.Errorf("volume file: %q, %v", data, err)
	}
}

// TestNodeObjectUpdateReachesRunningPods: a change of a stored ConfigMap
// rewrites the volume files of the running pod that mounts it, without a
// restart, and records ConfigMapUpdated on it; a pod that does not use
// it gets no event.
func TestNodeObjectUpdateReachesRunningPods(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cfg"}, Data: map[string]string{"a.conf": "one"}}
	if _, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts([]*corev1.ConfigMap{cm}, nil), ""); err != nil {
		t.Fatal(err)
	}
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}}
	other := enginetest.Pod()
	other.Name, other.UID = "other", "uid-other"
	other.Spec.Containers = other.Spec.Containers[:1]
	for _, p := range []*corev1.Pod{pod, other} {
		if !running(h.apply(p).Status, "app") {
			t.Fatalf("pod %s does not run", p.Name)
		}
	}
	file := filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginConfigMap, "cfg", h.cfg), "a.conf")
	starts := countCalls(h, "StartContainer")

	cm.Data["a.conf"] = "two"
	res, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts([]*corev1.ConfigMap{cm}, nil), "")
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Changed || res[0].Created {
		t.Errorf("result %+v, want changed", res[0])
	}
	h.eventually("the volume file follows the ConfigMap", func() bool {
		data, _ := os.ReadFile(file)
		return string(data) == "two"
	})
	if n := countCalls(h, "StartContainer"); n != starts {
		t.Errorf("StartContainer calls %d after the update, want %d: the container was restarted", n, starts)
	}
	if !slices.Contains(h.events(pod), engine.EventConfigMapUpdated) {
		t.Errorf("events of the pod %v, want %s", h.events(pod), engine.EventConfigMapUpdated)
	}
	if slices.Contains(h.events(other), engine.EventConfigMapUpdated) {
		t.Errorf("the pod that does not use the ConfigMap has events %v", h.events(other))
	}
}

// TestNodeTokenSecretUpdateRewritesTheProjectedFile: a projected volume
// as podsync-vk hands the kube-api-access volume over (the token a Secret
// source, with the namespace from the downward API) follows the Secret: a
// rotated token replaces the file's content in the running pod, in the
// volume's mode, its other files kept, without a restart — what the
// kubelet's remount does with a renewed token.
func TestNodeTokenSecretUpdateRewritesTheProjectedFile(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	tok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "podsync-token-uid-1-0-0"}, Data: map[string][]byte{"token": []byte("token-1")}}
	if _, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts(nil, []*corev1.Secret{tok}), ""); err != nil {
		t.Fatal(err)
	}
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: tok.Name},
				Items: []corev1.KeyToPath{{Key: "token", Path: "token"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
	if !running(h.apply(pod).Status, "app") {
		t.Fatal("pod does not run")
	}
	dir := criconfig.VolumeDir(pod, criconfig.VolumePluginProjected, "kube-api-access", h.cfg)
	starts := countCalls(h, "StartContainer")

	tok.Data["token"] = []byte("token-2")
	if _, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts(nil, []*corev1.Secret{tok}), ""); err != nil {
		t.Fatal(err)
	}
	h.eventually("the token file follows the Secret", func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "token"))
		return string(data) == "token-2"
	})
	if fi, err := os.Stat(filepath.Join(dir, "token")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("token file %v, %v: want mode 0644", fi, err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "namespace")); err != nil || string(data) != "shop" {
		t.Errorf("namespace file %q, %v: want it kept", data, err)
	}
	if n := countCalls(h, "StartContainer"); n != starts {
		t.Errorf("StartContainer calls %d after the rotation, want %d: the container was restarted", n, starts)
	}
}

// TestNodeDeletedOptionalObjectLeavesTheVolume: deleting an optional
// ConfigMap source removes its files from the running pod's volume at
// once, as the kubelet's next remount does; a required one's stay.
func TestNodeDeletedOptionalObjectLeavesTheVolume(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	opt := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "opt"}, Data: map[string]string{"a.conf": "one"}}
	req := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "req"}, Data: map[string]string{"b.conf": "two"}}
	if _, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts([]*corev1.ConfigMap{opt, req}, nil), ""); err != nil {
		t.Fatal(err)
	}
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "opt", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "opt"}, Optional: ptr.To(true)}}},
		{Name: "req", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "req"}}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "opt", MountPath: "/etc/opt"}, {Name: "req", MountPath: "/etc/req"}}
	if !running(h.apply(pod).Status, "app") {
		t.Fatal("pod does not run")
	}
	optFile := filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginConfigMap, "opt", h.cfg), "a.conf")
	reqFile := filepath.Join(criconfig.VolumeDir(pod, criconfig.VolumePluginConfigMap, "req", h.cfg), "b.conf")
	if _, err := os.Stat(optFile); err != nil {
		t.Fatalf("optional source's file: %v", err)
	}
	for _, name := range []string{"opt", "req"} {
		found, _, err := h.node.DeleteObject(h.ctx, store.ObjectRef{Kind: store.KindConfigMap, Namespace: "shop", Name: name}, "", "")
		if err != nil || !found {
			t.Fatalf("DeleteObject %s = %v, %v", name, found, err)
		}
	}
	h.eventually("the optional source's file leaves the volume", func() bool {
		_, err := os.Stat(optFile)
		return errors.Is(err, os.ErrNotExist)
	})
	if data, err := os.ReadFile(reqFile); err != nil || string(data) != "two" {
		t.Errorf("required source's file after its deletion: %q, %v; want it kept", data, err)
	}
	if !running(h.storedStatus(pod), "app") {
		t.Error("the pod stopped running when its objects were deleted")
	}
}

// TestNodeObjectPreconditions: an update of an immutable object is
// refused as the API server refuses it; a stale resourceVersion is
// ErrPreconditionFailed; an object or pod of a manifest file cannot be changed
// or deleted through the API.
func TestNodeObjectPreconditions(t *testing.T) {
	t.Parallel()
	h := newNodeHarness(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "frozen"}, Data: map[string]string{"k": "1"}, Immutable: ptr.To(true)}
	if _, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts([]*corev1.ConfigMap{cm}, nil), ""); err != nil {
		t.Fatal(err)
	}
	cm.Data["k"] = "2"
	if _, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts([]*corev1.ConfigMap{cm}, nil), ""); !errors.Is(err, errdefs.ErrInvalidSpec) {
		t.Errorf("update of an immutable ConfigMap: %v, want ErrInvalidSpec", err)
	}
	cm.Data["k"], cm.Immutable = "1", nil
	if _, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts([]*corev1.ConfigMap{cm}, nil), ""); !errors.Is(err, errdefs.ErrInvalidSpec) {
		t.Errorf("clearing immutable: %v, want ErrInvalidSpec", err)
	}

	mut := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "m"}, Data: map[string]string{"k": "1"}}
	res, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts([]*corev1.ConfigMap{mut}, nil), "")
	if err != nil {
		t.Fatal(err)
	}
	rv := res[0].Record.ResourceVersion()
	mut.Data["k"] = "2"
	if _, err := h.node.ApplyObjects(h.ctx, []store.ObjectPut{{ConfigMap: mut, ResourceVersion: rv}}, ""); err != nil {
		t.Fatalf("update at the stored version: %v", err)
	}
	mut.Data["k"] = "3"
	if _, err := h.node.ApplyObjects(h.ctx, []store.ObjectPut{{ConfigMap: mut, ResourceVersion: rv}}, ""); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Errorf("update at a stale version: %v, want ErrPreconditionFailed", err)
	}
	ref := store.ObjectRef{Kind: store.KindConfigMap, Namespace: "shop", Name: "m"}
	if _, _, err := h.node.DeleteObject(h.ctx, ref, rv, ""); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Errorf("delete at a stale version: %v, want ErrPreconditionFailed", err)
	}

	file := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "f",
		Annotations: map[string]string{engine.SourceAnnotation: "file:web.yaml"}}, Data: map[string]string{"k": "1"}}
	if _, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts([]*corev1.ConfigMap{file}, nil), "file:web.yaml"); err != nil {
		t.Fatal(err)
	}
	api := file.DeepCopy()
	api.Annotations = nil
	if _, err := h.node.ApplyObjects(h.ctx, engine.ObjectPuts([]*corev1.ConfigMap{api}, nil), ""); !errors.Is(err, errdefs.ErrOwnedByFile) {
		t.Errorf("API update of a file's ConfigMap: %v, want ErrOwnedByFile", err)
	}
	if _, _, err := h.node.DeleteObject(h.ctx, store.ObjectRef{Kind: store.KindConfigMap, Namespace: "shop", Name: "f"}, "", ""); !errors.Is(err, errdefs.ErrOwnedByFile) {
		t.Errorf("API delete of a file's ConfigMap: %v, want ErrOwnedByFile", err)
	}

	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Annotations = map[string]string{engine.SourceAnnotation: "file:web.yaml"}
	h.apply(pod)
	apiPod := pod.DeepCopy()
	apiPod.Annotations = nil
	if _, err := h.node.Apply(h.ctx, apiPod, nil, nil, nil); !errors.Is(err, errdefs.ErrOwnedByFile) {
		t.Errorf("API apply of a file's pod: %v, want ErrOwnedByFile", err)
	}
	if _, err := h.node.Delete(h.ctx, pod.Namespace, pod.Name, "", ptr.To[int64](0)); !errors.Is(err, errdefs.ErrOwnedByFile) {
		t.Errorf("API delete of a file's pod: %v, want ErrOwnedByFile", err)
	}
	if res, err := h.node.DeleteAs(h.ctx, "file:web.yaml", pod.Namespace, pod.Name, "", ptr.To[int64](0)); err != nil || !res.Found {
		t.Errorf("delete by the file: found %v, %v", res.Found, err)
	}
}

// countCalls is how many times the node called the runtime's name.
func countCalls(h *nodeHarness, name string) int {
	n := 0
	for _, c := range h.rt.GetCalls() {
		if c == name {
			n++
		}
	}
	return n
}
