package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/engine/errdefs"
)

func testCM(name, v string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"app": "web"}},
		Data: map[string]string{"k": v}}
}

// TestObjectsShareTheRevisionSpace: an object's resourceVersion is the
// revision of its log entry, in the pods' revision space; an unchanged
// put writes nothing; a Secret's values never leave the store but
// through GetObjectWithSecrets and ObjectsWithSecrets.
func TestObjectsShareTheRevisionSpace(t *testing.T) {
	s := openTest(t, Options{})
	mustPut(t, s, testPod("shop", "web", "u1"))
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "tok"}, Data: map[string][]byte{"t": []byte("s3cret")}}
	res, err := s.PutObjects([]ObjectPut{{ConfigMap: testCM("cfg", "1")}, {Secret: sec}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Record.ModRevision <= 1 || res[1].Record.ModRevision != res[0].Record.ModRevision+1 || !res[0].Created || !res[1].Changed {
		t.Fatalf("results %+v %+v", res[0], res[1])
	}
	if v := res[1].Record.Secret.Data["t"]; len(v) != 0 {
		t.Errorf("PutObjects returned the Secret's value %q", v)
	}
	entries, err := s.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	last := entries[len(entries)-1]
	if last.Kind != KindObjectApplied || last.Revision != res[1].Record.ModRevision || last.Secret == nil || len(last.Secret.Data["t"]) != 0 {
		t.Errorf("last entry %+v, want the Secret applied at its version, values removed", last)
	}
	rev := s.Revision()
	again, err := s.PutObjects([]ObjectPut{{ConfigMap: testCM("cfg", "1")}}, nil)
	if err != nil || again[0].Changed || s.Revision() != rev || again[0].Record.ResourceVersion() != res[0].Record.ResourceVersion() {
		t.Errorf("unchanged put: %+v, %v; revision %d, want %d", again, err, s.Revision(), rev)
	}
	full, err := s.GetObjectWithSecrets(ObjectRef{Kind: KindSecret, Namespace: "shop", Name: "tok"})
	if err != nil || string(full.Secret.Data["t"]) != "s3cret" {
		t.Errorf("GetObjectWithSecrets: %v, %v", full, err)
	}
	red, err := s.GetObject(ObjectRef{Kind: KindSecret, Namespace: "shop", Name: "tok"})
	if err != nil || len(red.Secret.Data["t"]) != 0 {
		t.Errorf("GetObject returned the value: %v, %v", red, err)
	}
	cms, secrets, err := s.ObjectsWithSecrets([]ObjectRef{{Kind: KindConfigMap, Namespace: "shop", Name: "cfg"},
		{Kind: KindSecret, Namespace: "shop", Name: "tok"}, {Kind: KindConfigMap, Namespace: "shop", Name: "absent"}})
	if err != nil || len(cms) != 1 || len(secrets) != 1 || string(secrets[0].Data["t"]) != "s3cret" {
		t.Errorf("ObjectsWithSecrets: %v %v %v", cms, secrets, err)
	}
	if _, err := s.GetObject(ObjectRef{Kind: KindConfigMap, Namespace: "shop", Name: "absent"}); !errors.Is(err, errdefs.ErrObjectNotFound) || !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetObject of a missing object: %v", err)
	}
}

// TestObjectPutIsAllOrNothing: a failing object of a put stores none of
// the others.
func TestObjectPutIsAllOrNothing(t *testing.T) {
	s := openTest(t, Options{})
	if _, err := s.PutObjects([]ObjectPut{{ConfigMap: testCM("a", "1")}, {ConfigMap: testCM("b", "1"), ResourceVersion: "7"}}, nil); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Fatalf("put with a stale version: %v", err)
	}
	if objs, _, _ := s.ListObjects(ObjectFilter{}); len(objs) != 0 {
		t.Errorf("stored %d objects of a refused put", len(objs))
	}
	// "0" is the version of an object not stored yet.
	if _, err := s.PutObjects([]ObjectPut{{ConfigMap: testCM("a", "1"), ResourceVersion: "0"}}, nil); err != nil {
		t.Errorf("create at version 0: %v", err)
	}
	if _, err := s.PutObjects([]ObjectPut{{ConfigMap: testCM("a", "2"), ResourceVersion: "0"}}, nil); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Errorf("create at version 0 of a stored object: %v", err)
	}
}

// TestObjectsSurviveARestartAndWatchResumes: objects are durable; a watch
// resumed after a reopen from a revision gets the object changes after
// it, in order, once each; list filters by kind, namespace and labels.
func TestObjectsSurviveARestartAndWatchResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.PutObjects([]ObjectPut{{ConfigMap: testCM("a", "1")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	from := res[0].Record.ModRevision
	if _, err := s.PutObjects([]ObjectPut{{ConfigMap: testCM("a", "2")}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteObject(ObjectRef{Kind: KindConfigMap, Namespace: "shop", Name: "a"}, "", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	if _, err := s.PutObjects([]ObjectPut{{ConfigMap: testCM("b", "1")}}, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	w, err := s.Watch(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		select {
		case e := <-w.Events():
			got = append(got, string(e.Kind)+" "+e.Object.Name)
		case <-ctx.Done():
			t.Fatalf("watch: got %v", got)
		}
	}
	want := []string{"ObjectApplied a", "ObjectDeleted a", "ObjectApplied b"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("watch after a restart: %v, want %v", got, want)
		}
	}
	if objs, _, _ := s.ListObjects(ObjectFilter{Kind: KindSecret}); len(objs) != 0 {
		t.Errorf("list of Secrets: %d objects", len(objs))
	}
	if objs, _, _ := s.ListObjects(ObjectFilter{Kind: KindConfigMap, Namespace: "shop"}); len(objs) != 1 || objs[0].ConfigMap.Name != "b" {
		t.Errorf("list of ConfigMaps: %v", objs)
	}
}

// TestObjectCapAndCompaction: an object over the record cap is refused;
// the log's entry cap compacts object entries like the pods'.
func TestObjectCapAndCompaction(t *testing.T) {
	s := openTest(t, Options{MaxRecordBytes: 512, KeepEntries: 2})
	big := testCM("big", string(make([]byte, 600)))
	if _, err := s.PutObjects([]ObjectPut{{ConfigMap: big}}, nil); !errors.Is(err, errdefs.ErrRecordTooLarge) {
		t.Errorf("put over the cap: %v", err)
	}
	for i := range 4 {
		if _, err := s.PutObjects([]ObjectPut{{ConfigMap: testCM("a", string(rune('0'+i)))}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if c := s.CompactRevision(); c != 2 {
		t.Errorf("compaction point %d, want 2", c)
	}
	if _, err := s.Watch(t.Context(), 1); !errors.Is(err, errdefs.ErrCompacted) {
		t.Errorf("watch from a compacted revision: %v", err)
	}
}
