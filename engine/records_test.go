package engine_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/store"
)

// TestRequestObjectsAreStoredObjects: a pod applied with a request's
// ConfigMaps and Secrets stores them as objects of the node, once each,
// and its record copies none of them, so a request of many pods and
// objects is not copied into every record.
func TestRequestObjectsAreStoredObjects(t *testing.T) {
	h := newNodeHarness(t)
	pod := enginetest.Pod()
	pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "used"}}}}
	cms := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "used"}, Data: map[string]string{"A": "1"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "other"}, Data: map[string]string{"B": "2"}},
	}
	secrets := []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "unused"}, Data: map[string][]byte{"k": []byte("v")}}}
	if _, err := h.node.Apply(h.ctx, pod, cms, secrets, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := h.st.GetWithSecrets(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.ConfigMaps) != 0 || len(rec.Secrets) != 0 {
		t.Errorf("record holds ConfigMaps %v and Secrets %v, want none", rec.ConfigMaps, rec.Secrets)
	}
	objs, _, err := h.st.ListObjects(store.ObjectFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Ref().String())
	}
	want := []string{"ConfigMap " + pod.Namespace + "/other", "ConfigMap " + pod.Namespace + "/used", "Secret " + pod.Namespace + "/unused"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("stored objects %v, want %v", got, want)
	}
	// A second apply of the same request writes nothing.
	rev := h.st.Revision()
	if _, err := h.node.Apply(h.ctx, pod, cms, secrets, nil); err != nil {
		t.Fatal(err)
	}
	if objs2, _, _ := h.st.ListObjects(store.ObjectFilter{}); objs2[0].ModRevision != objs[0].ModRevision || rev > h.st.Revision() {
		t.Errorf("a repeated apply changed the objects")
	}
}
