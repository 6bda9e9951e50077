package engine_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/engine/enginetest"
)

// TestRecordHoldsOnlyReferencedObjects: a pod applied with a request's
// ConfigMaps and Secrets keeps in its record only those it refers to, so
// a request of many pods and objects is not copied into every record.
func TestRecordHoldsOnlyReferencedObjects(t *testing.T) {
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
	if len(rec.ConfigMaps) != 1 || rec.ConfigMaps[0].Name != "used" || len(rec.Secrets) != 0 {
		t.Errorf("record holds ConfigMaps %d (first %v) and Secrets %d, want only ConfigMap used", len(rec.ConfigMaps), rec.ConfigMaps, len(rec.Secrets))
	}
}
