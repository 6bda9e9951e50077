package vk

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestObjectWatchesReadOnlyWhatPodsReference: a pod's Secret and
// ConfigMap are read one at a time — every list and watch of them names
// the object (a metadata.name field selector) in its namespace, as a
// kubelet under the Node authorizer reads them; none lists the cluster —
// a change is pushed, and a watch ends with the last pod that references
// its object.
func TestObjectWatchesReadOnlyWhatPodsReference(t *testing.T) {
	// The fake clientset sends no watch-list bookmarks (the API server
	// does).
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	kc := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pw"}, Data: map[string][]byte{"pw": []byte("p")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "other"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cfg"}},
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	var pushed []string
	w := newObjectWatches(ctx, kc, func(_ context.Context, secret bool, ns, name string) {
		mu.Lock()
		defer mu.Unlock()
		pushed = append(pushed, ns+"/"+name)
	}, nil)
	w.Use("team-a/app", "team-a", []string{"cfg"}, []string{"pw"})
	w.Use("team-a/other-app", "team-a", nil, []string{"pw"})
	s, err := w.Secret("team-a", "pw")
	if err != nil || string(s.Data["pw"]) != "p" {
		t.Fatalf("Secret = %v, %v", s, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(pushed)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	slices.Sort(pushed)
	got := slices.Compact(slices.Clone(pushed))
	mu.Unlock()
	if !slices.Equal(got, []string{"team-a/cfg", "team-a/pw"}) {
		t.Errorf("pushed %v, want the pod's objects", got)
	}
	for _, a := range kc.Actions() {
		if a.GetResource().Resource != "secrets" && a.GetResource().Resource != "configmaps" {
			continue
		}
		switch a := a.(type) {
		case k8stesting.ListAction:
			if a.GetNamespace() != "team-a" || a.GetListRestrictions().Fields.String() == "" {
				t.Errorf("list of %s in %q with fields %q: want one object of team-a", a.GetResource().Resource, a.GetNamespace(), a.GetListRestrictions().Fields)
			}
		case k8stesting.WatchAction:
			if a.GetNamespace() != "team-a" || a.GetWatchRestrictions().Fields.String() == "" {
				t.Errorf("watch of %s in %q with fields %q: want one object of team-a", a.GetResource().Resource, a.GetNamespace(), a.GetWatchRestrictions().Fields)
			}
		case k8stesting.GetAction:
			if a.GetNamespace() != "team-a" {
				t.Errorf("get of %s/%s", a.GetNamespace(), a.GetName())
			}
		}
	}
	w.Release("team-a/app")
	if got := w.watched(); len(got) != 1 || got[0] != (objectKey{true, "team-a", "pw"}) {
		t.Errorf("watched after one pod went: %v, want the Secret the other pod references", got)
	}
	w.Release("team-a/other-app")
	if got := w.watched(); len(got) != 0 {
		t.Errorf("watched after both pods went: %v", got)
	}
}
