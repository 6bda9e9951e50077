package engine_test

import (
	"errors"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/store"
)

// TestGetShared: GetShared returns the store's shared record, the same
// one until the pod changes, and ErrNotFound for a pod not stored.
func TestGetShared(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "podsync.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rt := enginetest.NewRuntime()
	node, err := engine.NewNode(engine.NodeOptions{Runtime: rt, Images: rt, Store: st,
		Config: criconfig.Options{RootDir: t.TempDir(), PodLogDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name, pod.UID = "default", "web", "uid-1"
	pod.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox"}}
	if _, err := st.Put(store.PodRecord{Pod: pod}); err != nil {
		t.Fatal(err)
	}
	a, err := node.GetShared(t.Context(), "default", "web")
	if err != nil || a.Pod.UID != "uid-1" {
		t.Fatalf("GetShared = %v, %v", a, err)
	}
	if again, err := node.GetShared(t.Context(), "default", "web"); err != nil || again != a {
		t.Errorf("GetShared of an unchanged pod: %v, same record %v", err, again == a)
	}
	if _, err := st.Append(store.StatusChange(store.RefOf(pod), &corev1.PodStatus{Phase: corev1.PodRunning})); err != nil {
		t.Fatal(err)
	}
	b, err := node.GetShared(t.Context(), "default", "web")
	if err != nil {
		t.Fatalf("GetShared after a status change: %v", err)
	}
	if b == a || b.Pod.Status.Phase != corev1.PodRunning {
		t.Errorf("GetShared after a status change: phase %q, same record %v", b.Pod.Status.Phase, b == a)
	}
	if _, err := node.GetShared(t.Context(), "default", "db"); !errors.Is(err, errdefs.ErrNotFound) || !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("GetShared of a pod not stored: %v, want errdefs.ErrNotFound and errdefs.ErrPodNotFound", err)
	}
}
