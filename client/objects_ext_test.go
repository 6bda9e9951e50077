package client_test

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/errorinfo"
)

func cmProto(name, v string) *podsyncv1.ConfigMap {
	return &podsyncv1.ConfigMap{Metadata: &podsyncv1.ObjectMeta{Name: name}, Data: map[string]string{"k": v}}
}

// TestObjects: the object RPCs against the real service: apply is
// idempotent and versioned, Get and List never return a Secret's value,
// a stale resource_version is ABORTED CONFLICT, an immutable object
// refuses a change, Delete is idempotent, and WatchObjects resumes from a
// revision; a pod referring to a ConfigMap applied in a separate call
// runs.
func TestObjects(t *testing.T) {
	d := newDaemon(t)
	c := d.client(t)
	ctx := testContext(t)

	res, err := c.ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{
		ConfigMaps: []*podsyncv1.ConfigMap{cmProto("cfg", "1")},
		Secrets:    []*podsyncv1.Secret{{Metadata: &podsyncv1.ObjectMeta{Name: "tok"}, StringData: map[string]string{"t": "s3cret"}}},
	})
	if err != nil {
		t.Fatalf("ApplyObjects: %v", err)
	}
	if len(res.GetResults()) != 2 || !res.GetResults()[0].GetCreated() || res.GetResults()[0].GetObject().GetNamespace() != "default" {
		t.Fatalf("results %v", res.GetResults())
	}
	rv := res.GetResults()[0].GetObject().GetResourceVersion()
	again, err := c.ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{ConfigMaps: []*podsyncv1.ConfigMap{cmProto("cfg", "1")}})
	if err != nil || again.GetResults()[0].GetChanged() || again.GetResults()[0].GetObject().GetResourceVersion() != rv {
		t.Errorf("unchanged apply: %v, %v", again, err)
	}
	sec, err := c.GetObject(ctx, podsyncv1.ObjectKind_OBJECT_KIND_SECRET, "", "tok")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := sec.GetSecret().GetData()["t"]; !ok || len(v) != 0 {
		t.Errorf("GetObject of a Secret: data %v, want the key without its value", sec.GetSecret().GetData())
	}
	if _, err := c.GetObject(ctx, podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP, "", "absent"); !errors.Is(err, client.ErrNotFound) || client.Reason(err) != errorinfo.ReasonObjectNotFound {
		t.Errorf("GetObject of a missing object: %v", err)
	}
	list, err := c.ListObjects(ctx, &podsyncv1.ListObjectsRequest{})
	if err != nil || len(list.GetObjects()) != 2 || list.GetObjects()[0].GetConfigMap() == nil || len(list.GetObjects()[1].GetSecret().GetData()["t"]) != 0 {
		t.Errorf("ListObjects: %v, %v", list, err)
	}

	// A pod refers to the stored ConfigMap and Secret.
	pod := testPod("", "web", nil)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "k"}}}}
	req, err := client.SyncPodRequestFromPod(pod, nil, nil)
	if err != nil {
		t.Fatalf("a pod whose ConfigMap is stored is refused by the SDK: %v", err)
	}
	sync, err := c.SyncPod(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs := sync.GetStatus().GetContainerStatuses(); len(cs) != 1 || cs[0].GetState().GetRunning() == nil {
		t.Errorf("pod using a stored ConfigMap: %v", sync.GetStatus())
	}

	stale := cmProto("cfg", "2")
	stale.Metadata.ResourceVersion = "12345"
	if _, err := c.ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{ConfigMaps: []*podsyncv1.ConfigMap{stale}}); !errors.Is(err, client.ErrConflict) || status.Code(err) != codes.Aborted {
		t.Errorf("apply at a stale version: %v, want ABORTED CONFLICT", err)
	}
	fresh := cmProto("cfg", "2")
	fresh.Metadata.ResourceVersion = rv
	upd, err := c.ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{ConfigMaps: []*podsyncv1.ConfigMap{fresh}})
	if err != nil || !upd.GetResults()[0].GetChanged() {
		t.Fatalf("apply at the stored version: %v, %v", upd, err)
	}

	frozen := cmProto("frozen", "1")
	frozen.Immutable = ptr.To(true)
	if _, err := c.ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{ConfigMaps: []*podsyncv1.ConfigMap{frozen}}); err != nil {
		t.Fatal(err)
	}
	frozen.Data["k"] = "2"
	_, err = c.ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{ConfigMaps: []*podsyncv1.ConfigMap{frozen}})
	if !errors.Is(err, client.ErrInvalidArgument) || len(client.FieldViolations(err)) != 1 || client.FieldViolations(err)[0].GetField() != "data" {
		t.Errorf("update of an immutable ConfigMap: %v (violations %v), want INVALID_ARGUMENT on data", err, client.FieldViolations(err))
	}

	annotated := cmProto("claims", "1")
	annotated.Metadata.Annotations = map[string]string{"podsync.io/source": "file:x.yaml"}
	if _, err := c.ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{ConfigMaps: []*podsyncv1.ConfigMap{annotated}}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("an object claiming a file source: %v, want INVALID_ARGUMENT", err)
	}

	del, err := c.DeleteObject(ctx, &podsyncv1.DeleteObjectRequest{Kind: podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP, Name: "frozen"})
	if err != nil || !del.GetFound() {
		t.Fatalf("DeleteObject: %v, %v", del, err)
	}
	if del2, err := c.DeleteObject(ctx, &podsyncv1.DeleteObjectRequest{Kind: podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP, Name: "frozen"}); err != nil || del2.GetFound() {
		t.Errorf("second DeleteObject: %v, %v", del2, err)
	}

	// The watch from the first apply's revision replays every change.
	since := mustAtoi(t, rv)
	var got []string
	errDone := errors.New("done")
	err = c.WatchObjects(ctx, &podsyncv1.WatchObjectsRequest{SinceRevision: since}, func(m *podsyncv1.WatchObjectsResponse) error {
		kind := "applied"
		if m.GetDeleted() != nil {
			kind = "deleted"
		}
		got = append(got, kind+" "+m.GetObject().GetName())
		if m.GetDeleted() != nil {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("WatchObjects: %v", err)
	}
	want := []string{"applied tok", "applied cfg", "applied frozen", "deleted frozen"}
	if len(got) != len(want) {
		t.Fatalf("watched %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("watched %v, want %v", got, want)
		}
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, r := range s {
		if r < '0' || r > '9' {
			t.Fatalf("resource version %q is not a number", s)
		}
		n = n*10 + int64(r-'0')
	}
	return n
}
