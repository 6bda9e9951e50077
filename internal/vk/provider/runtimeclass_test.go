package provider

import (
	"context"
	"testing"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// fakeRuntimeClasses are the API server's RuntimeClasses: name → handler.
type fakeRuntimeClasses map[string]string

func (f fakeRuntimeClasses) Handler(name string) (string, error) {
	h, ok := f[name]
	if !ok {
		return "", apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclass"}, name)
	}
	return h, nil
}

// TestRuntimeClassIsSentAsItsHandler: a pod's runtimeClassName reaches
// podsyncd as its RuntimeClass's handler (the kubelet's
// LookupRuntimeHandler, whose result RunPodSandbox gets); a RuntimeClass
// with an empty handler is the runtime's default. A RuntimeClass the API
// server does not have is, as on a kubelet, a FailedCreatePodSandBox event
// and the pod left Pending, its containers in ContainerCreating — even a
// restartPolicy Never pod, which an error from CreatePod would make the
// node library fail — until the RuntimeClass appears and the pod is
// applied.
func TestRuntimeClassIsSentAsItsHandler(t *testing.T) {
	classes := fakeRuntimeClasses{"sandboxed": "kata", "default": ""}
	for _, tc := range []struct {
		name string
		rc   *string
		want string
	}{
		{"no runtime class", nil, ""},
		{"a runtime class", ptr.To("sandboxed"), "kata"},
		{"a runtime class of the default handler", ptr.To("default"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			p := New("vk-1", f, zap.NewNop())
			p.UseRuntimeClasses(classes)
			pod := testPod("1")
			pod.Spec.RuntimeClassName = tc.rc
			if err := p.CreatePod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if got := f.synced[len(f.synced)-1].GetPod().GetSpec().GetRuntimeClassName(); got != tc.want {
				t.Errorf("runtimeClassName sent = %q, want the handler %q", got, tc.want)
			}
		})
	}

	t.Run("an unknown runtime class", func(t *testing.T) {
		f := newFake()
		p := New("vk-1", f, zap.NewNop())
		classes := fakeRuntimeClasses{}
		p.UseRuntimeClasses(classes)
		rec := &fakeRecorder{}
		p.UseEvents(rec)
		n := &notified{ch: make(chan *corev1.Pod, 4)}
		p.NotifyPods(context.Background(), n.fn)
		pod := testPod("1")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		pod.Spec.RuntimeClassName = ptr.To("missing")
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		if err := p.CreatePod(context.Background(), pod); err != nil {
			t.Fatalf("CreatePod: %v, want nil: an error would make the node library fail the pod", err)
		}
		if len(f.synced) != 0 {
			t.Errorf("the pod was applied on podsyncd: %v", f.synced)
		}
		want := `Failed to create pod sandbox: runtimeclass.node.k8s.io "missing" not found`
		if len(rec.events) != 1 || rec.events[0].typ != corev1.EventTypeWarning || rec.events[0].reason != "FailedCreatePodSandBox" || rec.events[0].message != want {
			t.Errorf("events %+v, want one Warning FailedCreatePodSandBox %q", rec.events, want)
		}
		got := n.next(t)
		cs := got.Status.ContainerStatuses
		if got.Status.Phase != corev1.PodPending || len(cs) != 1 || cs[0].State.Waiting == nil || cs[0].State.Waiting.Reason != "ContainerCreating" {
			t.Errorf("status %+v, want Pending, the container waiting in ContainerCreating", got.Status)
		}
		if len(got.Status.Conditions) == 0 || got.Status.Conditions[0].Type != corev1.PodScheduled {
			t.Errorf("conditions %+v, want the scheduler's kept", got.Status.Conditions)
		}

		// Another class appearing changes nothing; this one applies it.
		p.RuntimeClassChanged(context.Background(), "other")
		if len(f.synced) != 0 {
			t.Fatalf("applied on another RuntimeClass's creation: %v", f.synced)
		}
		classes["missing"] = "runc"
		p.RuntimeClassChanged(context.Background(), "missing")
		if len(f.synced) != 1 || f.synced[0].GetPod().GetSpec().GetRuntimeClassName() != "runc" {
			t.Fatalf("applied %v, want the pod once with handler runc", f.synced)
		}
		if st, err := p.GetPodStatus(context.Background(), pod.Namespace, pod.Name); err == nil && st != nil && st.Phase == corev1.PodPending && len(st.ContainerStatuses) == 1 &&
			st.ContainerStatuses[0].State.Waiting != nil && st.ContainerStatuses[0].State.Waiting.Reason == "ContainerCreating" {
			t.Errorf("status %+v still the waiting one after the apply, want podsyncd's", st)
		}
		p.RuntimeClassChanged(context.Background(), "missing")
		if len(f.synced) != 1 {
			t.Errorf("applied again on a later change of the RuntimeClass: %d applies", len(f.synced))
		}
	})

	t.Run("without the API server's RuntimeClasses", func(t *testing.T) {
		f := newFake()
		p := New("vk-1", f, zap.NewNop())
		pod := testPod("1")
		pod.Spec.RuntimeClassName = ptr.To("runc")
		if err := p.CreatePod(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		if got := f.synced[0].GetPod().GetSpec().GetRuntimeClassName(); got != "runc" {
			t.Errorf("runtimeClassName sent = %q, want the name as it is", got)
		}
	})
}
