package provider

import (
	"context"
	"testing"

	"go.uber.org/zap"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/validation"
)

func TestPodsAskForTheirNamespacesLevel(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	levels := map[string]string{"default": "restricted", "tools": "privileged", "odd": "strict"}
	p.UseNamespaceLevels(func(ns string) string { return levels[ns] })
	asked := func(i int) string {
		return f.synced[i].GetPod().GetMetadata().GetAnnotations()[validation.AnnotationPodSecurity]
	}
	pod := testPod("1")
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if asked(0) != "restricted" {
		t.Errorf("level asked in a restricted namespace = %q, want restricted", asked(0))
	}
	// The namespace loosens: the running pod keeps its level.
	levels["default"] = "baseline"
	if err := p.UpdatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if asked(1) != "restricted" {
		t.Errorf("level asked on an update after the namespace changed = %q, want the pod's first, restricted", asked(1))
	}
	// Privileged, unlabelled or unknown: no narrowing asked.
	for i, ns := range []string{"tools", "unlabelled", "odd"} {
		other := testPod("2")
		other.Namespace, other.Name = ns, "p"
		if err := p.CreatePod(context.Background(), other); err != nil {
			t.Fatal(err)
		}
		if got := asked(2 + i); got != "" {
			t.Errorf("level asked in namespace %s = %q, want none", ns, got)
		}
	}

	// podsync-vk restarted: the level podsyncd holds for the pod stays,
	// whatever its namespace says now.
	f2 := newFake()
	f2.held = &podsyncv1.Pod{Metadata: &podsyncv1.ObjectMeta{Namespace: "default", Name: "web", Uid: uid1,
		Annotations: map[string]string{validation.AnnotationPodSecurity: "restricted"}}}
	p2 := New("vk-1", f2, zap.NewNop())
	p2.UseNamespaceLevels(func(ns string) string { return levels[ns] })
	if err := p2.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := f2.synced[0].GetPod().GetMetadata().GetAnnotations()[validation.AnnotationPodSecurity]; got != "restricted" {
		t.Errorf("level asked after a restart = %q, want the one podsyncd holds, restricted", got)
	}
}
