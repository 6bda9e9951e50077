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
// and an error the node library retries, the pod left Pending: nothing
// is applied, nothing refused for good.
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
		p.UseRuntimeClasses(classes)
		rec := &fakeRecorder{}
		p.UseEvents(rec)
		pod := testPod("1")
		pod.Spec.RuntimeClassName = ptr.To("missing")
		err := p.CreatePod(context.Background(), pod)
		if !apierrors.IsNotFound(err) {
			t.Fatalf("CreatePod: %v, want the RuntimeClass's NotFound, for the node library to retry", err)
		}
		if len(f.synced) != 0 {
			t.Errorf("the pod was applied on podsyncd: %v", f.synced)
		}
		want := `Failed to create pod sandbox: runtimeclass.node.k8s.io "missing" not found`
		if len(rec.events) != 1 || rec.events[0].typ != corev1.EventTypeWarning || rec.events[0].reason != "FailedCreatePodSandBox" || rec.events[0].message != want {
			t.Errorf("events %+v, want one Warning FailedCreatePodSandBox %q", rec.events, want)
		}
		if st, err := p.GetPodStatus(context.Background(), pod.Namespace, pod.Name); err == nil && st != nil && st.Phase == corev1.PodFailed {
			t.Errorf("status %+v: the pod failed, want it left Pending", st)
		}

		classes["missing"] = "runc"
		if err := p.CreatePod(context.Background(), pod); err != nil {
			t.Fatalf("CreatePod once the RuntimeClass exists: %v", err)
		}
		if got := f.synced[len(f.synced)-1].GetPod().GetSpec().GetRuntimeClassName(); got != "runc" {
			t.Errorf("runtimeClassName sent = %q, want runc", got)
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
