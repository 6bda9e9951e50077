package provider

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

func (f *fakePodsync) DeleteObject(_ context.Context, req *podsyncv1.DeleteObjectRequest) (*podsyncv1.DeleteObjectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objDeleted = append(f.objDeleted, req.GetKind().String()+" "+req.GetNamespace()+"/"+req.GetName())
	return &podsyncv1.DeleteObjectResponse{Found: true}, nil
}

func (f *fakePodsync) ApplyObjects(_ context.Context, req *podsyncv1.ApplyObjectsRequest) (*podsyncv1.ApplyObjectsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "ApplyObjects")
	if f.applyErr != nil {
		return nil, f.applyErr
	}
	f.applied = append(f.applied, req)
	return &podsyncv1.ApplyObjectsResponse{}, nil
}

func (f *fakePodsync) Exec(_ context.Context, o client.ExecOptions) (int, error) {
	f.mu.Lock()
	f.exec = append(f.exec, o)
	f.mu.Unlock()
	if o.Stdout != nil {
		_, _ = io.WriteString(o.Stdout, "out\n")
	}
	return len(o.Command) - 1, nil // "sh -c ..." exits 2
}

// Attach reports the first terminal size it is given as stdout and exits
// with the container's code 1.
func (f *fakePodsync) Attach(_ context.Context, o client.AttachOptions) (int, error) {
	if o.TTY && o.TerminalSizes != nil {
		sz := <-o.TerminalSizes
		_, _ = fmt.Fprintf(o.Stdout, "%dx%d %s/%s/%s", sz.Width, sz.Height, o.Namespace, o.Name, o.Container)
	}
	return 1, nil
}

func (f *fakePodsync) PortForward(_ context.Context, _, _ string, _ uint32, conn io.ReadWriter) error {
	_, err := io.WriteString(conn, "page")
	return err
}

func (f *fakePodsync) StatsSummary(context.Context, string) (*podsyncv1.ListPodStatsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.summary, f.summaryErr
}

// fakeObjects is an API server's ConfigMaps and Secrets.
type fakeObjects struct {
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
}

func (o fakeObjects) ConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	if cm, ok := o.cms[key(namespace, name)]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (o fakeObjects) Secret(namespace, name string) (*corev1.Secret, error) {
	if s, ok := o.secrets[key(namespace, name)]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func apiMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: "4711", UID: k8stypes.UID("u-" + name),
		Labels: map[string]string{"app": "web"}}
}

func podWithObjects() *corev1.Pod {
	pod := testPod("1")
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
		{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "web-tls"}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "not-yet"}}},
		}}}},
	}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PW", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "web-pw"}, Key: "pw"}}}}
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	return pod
}

func testObjects() fakeObjects {
	return fakeObjects{
		cms: map[string]*corev1.ConfigMap{
			"default/web-config": {ObjectMeta: apiMeta("web-config"), Data: map[string]string{"index.html": "v1"}},
			"default/unused":     {ObjectMeta: apiMeta("unused"), Data: map[string]string{"a": "b"}},
		},
		secrets: map[string]*corev1.Secret{
			"default/web-tls": {ObjectMeta: apiMeta("web-tls"), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"tls.key": []byte("k")}},
			"default/web-pw":  {ObjectMeta: apiMeta("web-pw"), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"pw": []byte("p")}},
			"default/regcred": {ObjectMeta: apiMeta("regcred"), Type: corev1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}},
		},
	}
}

type appliedNames struct{ ConfigMaps, Secrets []string }

func names(req *podsyncv1.ApplyObjectsRequest) appliedNames {
	var n appliedNames
	for _, cm := range req.GetConfigMaps() {
		n.ConfigMaps = append(n.ConfigMaps, cm.GetMetadata().GetNamespace()+"/"+cm.GetMetadata().GetName())
	}
	for _, s := range req.GetSecrets() {
		n.Secrets = append(n.Secrets, s.GetMetadata().GetNamespace()+"/"+s.GetMetadata().GetName())
	}
	return n
}

func TestCreatePodSendsTheObjectsItReferencesWithIt(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	p.UseObjects(testObjects())
	if err := p.CreatePod(t.Context(), podWithObjects()); err != nil {
		t.Fatal(err)
	}
	// One call: the pod and its objects are stored in one transaction.
	if diff := cmp.Diff([]string{"SyncPod"}, f.calls); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
	// The referenced objects the API server has; "unused" is not
	// referenced, "not-yet" not there (the pod waits for it on podsyncd).
	want := appliedNames{ConfigMaps: []string{"default/web-config"}, Secrets: []string{"default/regcred", "default/web-tls", "default/web-pw"}}
	if diff := cmp.Diff(want, names(f.applied[0])); diff != "" {
		t.Errorf("applied objects (-want +got):\n%s", diff)
	}
	cm := f.applied[0].GetConfigMaps()[0]
	if rv := cm.GetMetadata().GetResourceVersion(); rv != "" {
		t.Errorf("pushed configmap has resourceVersion %q, want none (the API server's would be a precondition on podsyncd)", rv)
	}
	if got := cm.GetMetadata().GetLabels(); got[OwnerLabel] != "vk-1" || got["app"] != "web" {
		t.Errorf("pushed configmap labels = %v, want its own and the owner label", got)
	}
	if got := cm.GetData()["index.html"]; got != "v1" {
		t.Errorf("pushed configmap data = %v", cm.GetData())
	}
	if got := string(f.applied[0].GetSecrets()[2].GetData()["pw"]); got != "p" {
		t.Errorf("pushed secret data = %q, want p", got)
	}
}

// TestPodIsJudgedWithoutItsObjectsWhenTheyAreRefused: a SyncPod with
// objects that podsyncd refuses as invalid (say a key the pod names is not
// in the ConfigMap, which the kubelet reports on the container, not the
// pod) is sent again as ApplyObjects then SyncPod without objects; a
// refused object is then an error to retry, not the pod's failure.
func TestPodIsJudgedWithoutItsObjectsWhenTheyAreRefused(t *testing.T) {
	for _, refused := range []error{
		&client.Error{Op: "SyncPod", Code: codes.InvalidArgument, Message: "pod.spec.volumes[0].configMap.items[0].key: Not found"},
		&client.Error{Op: "SyncPod", Code: codes.FailedPrecondition, Reason: client.ReasonOwnedByFile},
	} {
		f := newFake()
		f.withObjectsErr = refused
		p := New("vk-1", f, zap.NewNop())
		p.UseObjects(testObjects())
		if err := p.CreatePod(t.Context(), podWithObjects()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"SyncPod", "ApplyObjects", "SyncPod"}, f.calls); diff != "" {
			t.Fatalf("calls after %v (-want +got):\n%s", refused, diff)
		}
		if last := f.synced[1]; len(last.GetConfigMaps())+len(last.GetSecrets()) != 0 {
			t.Errorf("the second SyncPod carries objects: %v", last)
		}
		if got, err := p.GetPod(t.Context(), "default", "web"); err != nil || got.Status.Phase == corev1.PodFailed {
			t.Errorf("pod after its objects were refused = %v, %v; want it applied, not failed", got, err)
		}

		// podsyncd refuses the objects on their own too: an error, so
		// that the node library tries the pod again.
		f = newFake()
		f.withObjectsErr = refused
		f.applyErr = refused
		p = New("vk-1", f, zap.NewNop())
		p.UseObjects(testObjects())
		if err := p.CreatePod(t.Context(), podWithObjects()); err == nil {
			t.Errorf("CreatePod with its objects refused (%v): nil error, want one to retry", refused)
		}
		if diff := cmp.Diff([]string{"SyncPod", "ApplyObjects"}, f.calls); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
	}
}

func TestObjectChangedPushesOnlyObjectsItsPodsUse(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	objs := testObjects()
	p.UseObjects(objs)
	if err := p.CreatePod(t.Context(), podWithObjects()); err != nil {
		t.Fatal(err)
	}
	f.applied = nil
	objs.cms["default/web-config"].Data["index.html"] = "v2"
	p.ObjectChanged(t.Context(), false, "default", "web-config")
	p.ObjectChanged(t.Context(), false, "default", "unused")
	p.ObjectChanged(t.Context(), false, "other", "web-config")
	p.ObjectChanged(t.Context(), true, "default", "web-config") // a Secret of that name is not used
	objs.cms["default/not-yet"] = &corev1.ConfigMap{ObjectMeta: apiMeta("not-yet")}
	p.ObjectChanged(t.Context(), false, "default", "not-yet")
	var got []appliedNames
	for _, req := range f.applied {
		got = append(got, names(req))
	}
	want := []appliedNames{{ConfigMaps: []string{"default/web-config"}}, {ConfigMaps: []string{"default/not-yet"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("pushed (-want +got):\n%s", diff)
	}
	if v := f.applied[0].GetConfigMaps()[0].GetData()["index.html"]; v != "v2" {
		t.Errorf("pushed data = %q, want the update v2", v)
	}

	// Once the pod is deleted its objects are no longer pushed.
	if err := p.DeletePod(t.Context(), podWithObjects()); err != nil {
		t.Fatal(err)
	}
	f.applied = nil
	p.ObjectChanged(t.Context(), false, "default", "web-config")
	if len(f.applied) != 0 {
		t.Errorf("pushed %v for a deleted pod", names(f.applied[0]))
	}
}

func TestObjectDeletedDeletesOnlyObjectsItsPodsUse(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	objs := testObjects()
	p.UseObjects(objs)
	if err := p.CreatePod(t.Context(), podWithObjects()); err != nil {
		t.Fatal(err)
	}
	p.ObjectDeleted(t.Context(), true, "default", "web-pw")
	p.ObjectDeleted(t.Context(), false, "default", "unused")
	p.ObjectDeleted(t.Context(), false, "other", "web-config")
	p.ObjectDeleted(t.Context(), true, "default", "web-config") // a Secret of that name is not used
	p.ObjectDeleted(t.Context(), false, "default", "web-config")
	want := []string{"OBJECT_KIND_SECRET default/web-pw", "OBJECT_KIND_CONFIG_MAP default/web-config"}
	if diff := cmp.Diff(want, f.objDeleted); diff != "" {
		t.Errorf("deleted on podsync (-want +got):\n%s", diff)
	}
}
