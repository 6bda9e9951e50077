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
	w := newObjectWatches(ctx, kc).node(ctx, func(_ context.Context, secret bool, ns, name string) {
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
	if got := w.w.watched(); len(got) != 1 || got[0] != (objectKey{true, "team-a", "pw"}) {
		t.Errorf("watched after one pod went: %v, want the Secret the other pod references", got)
	}
	w.Release("team-a/other-app")
	if got := w.w.watched(); len(got) != 0 {
		t.Errorf("watched after both pods went: %v", got)
	}
}

// TestObjectWatchesSharedByNodes: an object the pods of several nodes
// reference is watched once, a change of it is pushed to each of those
// nodes, and its watch ends only when the last of them releases it (a
// node that ends releases all its pods').
func TestObjectWatchesSharedByNodes(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	root := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "1"}}
	kc := fake.NewClientset(root)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := newObjectWatches(ctx, kc)
	var mu sync.Mutex
	pushed := map[string]int{}
	nodeObjects := func(node string) *nodeObjects {
		return w.node(ctx, func(_ context.Context, _ bool, ns, name string) {
			mu.Lock()
			defer mu.Unlock()
			pushed[node]++
		}, nil)
	}
	a, b := nodeObjects("a"), nodeObjects("b")
	a.Use("default/p1", "default", []string{"kube-root-ca.crt"}, nil)
	b.Use("default/p2", "default", []string{"kube-root-ca.crt"}, nil)
	b.Use("default/p3", "default", []string{"kube-root-ca.crt"}, nil)
	if got := w.watched(); len(got) != 1 {
		t.Fatalf("watched %v, want the ConfigMap once", got)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: pushed %v", what, pushed)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The watch lists the ConfigMap (pushed to the nodes using it then);
	// a change after that goes to both nodes.
	waitFor("listed", func() bool { return w.synced(objectKey{false, "default", "kube-root-ca.crt"}) != nil })
	mu.Lock()
	before := map[string]int{"a": pushed["a"], "b": pushed["b"]}
	mu.Unlock()
	root.Data["ca.crt"] = "2"
	if _, err := kc.CoreV1().ConfigMaps("default").Update(ctx, root, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the change pushed to both nodes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return pushed["a"] > before["a"] && pushed["b"] > before["b"]
	})
	waitFor("the change in the watch's cache", func() bool {
		cm, err := b.ConfigMap("default", "kube-root-ca.crt")
		return err == nil && cm.Data["ca.crt"] == "2"
	})

	b.ReleaseAll()
	if got := w.watched(); len(got) != 1 {
		t.Errorf("watched after node b ended: %v, want the ConfigMap node a's pod references", got)
	}
	b.Use("default/p2", "default", nil, nil)
	a.Release("default/p1")
	if got := w.watched(); len(got) != 0 {
		t.Errorf("watched after every pod went: %v", got)
	}
}
