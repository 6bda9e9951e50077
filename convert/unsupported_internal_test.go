package convert

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSameEncoding: equal encodings vouch for a round trip only with the
// same type meta, and an unsupported field's loss shows in them.
func TestSameEncoding(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	back := pod.DeepCopy()
	if !sameEncoding(pod, back) {
		t.Error("a copy: not the same encoding")
	}
	back.Kind = ""
	if sameEncoding(pod, back) {
		t.Error("another kind: the same encoding")
	}
	lost := pod.DeepCopy()
	lost.Finalizers = []string{"f"}
	if sameEncoding(lost, pod) {
		t.Error("a lost finalizer: the same encoding")
	}
	if sameEncoding(map[string]any{"a": 1}, map[string]any{"a": 1}) {
		t.Error("values without an encoding: vouched for")
	}
}

// BenchmarkUnsupportedFields is the check on a pod that lost nothing, by
// its encodings, against the JSON comparison alone.
func BenchmarkUnsupportedFields(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "manifests", "multi-container.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	m, err := Decode(bytes.NewReader(raw))
	if err != nil || len(m.Pods) != 1 {
		b.Fatalf("decode: %v", err)
	}
	pod := m.Pods[0]
	Default(pod)
	back, err := PodFromProto(podToProto(pod))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		check func(any, any) bool
	}{
		{"encoding", func(a, b any) bool { return len(unsupportedFields(a, b)) == 0 }},
		{"json", func(a, b any) bool { return len(unsupportedJSON(a, b)) == 0 }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !c.check(pod, back) {
					b.Fatal("fields lost")
				}
			}
		})
	}
}
