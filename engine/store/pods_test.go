package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	testclock "k8s.io/utils/clock/testing"

	"github.com/podsync/podsync/engine/errdefs"
)

func names(recs []*PodRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Pod.Namespace+"/"+r.Pod.Name)
	}
	return out
}

func TestPutGetListDelete(t *testing.T) {
	s := openTest(t, Options{})
	// Namespaces "a" and "a-b" check the index order: "a" sorts first.
	web := mustPut(t, s, testPod("a-b", "web", "uid-web"))
	db := mustPut(t, s, testPod("a", "db", "uid-db"))
	cache := mustPut(t, s, testPod("a", "cache", "uid-cache"))

	got, err := s.Get("uid-web")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(web, got); diff != "" {
		t.Errorf("Get differs from what Put returned (-put +get):\n%s", diff)
	}
	if got.Generation != 1 || !got.CreatedAt.Equal(t0) || got.CreateRevision != got.ModRevision || got.Deleting {
		t.Errorf("new record: generation %d, created %v, revisions %d/%d, deleting %t", got.Generation, got.CreatedAt, got.CreateRevision, got.ModRevision, got.Deleting)
	}
	byName, err := s.GetByName("a", "db")
	if err != nil {
		t.Fatalf("GetByName: %v", err)
	}
	if diff := cmp.Diff(db, byName); diff != "" {
		t.Errorf("GetByName (-put +get):\n%s", diff)
	}

	all, rev, err := s.List(Filter{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := []string{"a/cache", "a/db", "a-b/web"}; !cmp.Equal(names(all), want) {
		t.Errorf("List = %v, want %v", names(all), want)
	}
	if rev != s.Revision() || rev != cache.ModRevision {
		t.Errorf("List revision %d, store %d, last put %d", rev, s.Revision(), cache.ModRevision)
	}

	inA, _, err := s.List(Filter{Namespace: "a"})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := []string{"a/cache", "a/db"}; !cmp.Equal(names(inA), want) {
		t.Errorf("List(namespace a) = %v, want %v", names(inA), want)
	}
	sel, _, err := s.List(Filter{Selector: labels.SelectorFromSet(labels.Set{"app": "web"})})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := []string{"a-b/web"}; !cmp.Equal(names(sel), want) {
		t.Errorf("List(app=web) = %v, want %v", names(sel), want)
	}
	mustAppend(t, s, StatusChange(RefOf(db.Pod), &corev1.PodStatus{Phase: corev1.PodRunning}))
	running, _, err := s.List(Filter{Phases: []corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded}})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := []string{"a/db"}; !cmp.Equal(names(running), want) {
		t.Errorf("List(Running, Succeeded) = %v, want %v", names(running), want)
	}

	delRev, err := s.Delete("uid-db")
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if delRev != s.Revision() {
		t.Errorf("Delete revision %d, store revision %d", delRev, s.Revision())
	}
	if _, err := s.Get("uid-db"); !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("Get after Delete: %v, want errdefs.ErrPodNotFound", err)
	}
	if _, err := s.GetByName("a", "db"); !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("GetByName after Delete: %v, want errdefs.ErrPodNotFound", err)
	}
	if _, err := s.Delete("uid-db"); !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("second Delete: %v, want errdefs.ErrPodNotFound", err)
	}
	all, _, err = s.List(Filter{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := []string{"a/cache", "a-b/web"}; !cmp.Equal(names(all), want) {
		t.Errorf("List after Delete = %v, want %v", names(all), want)
	}
	// The name is free for a new incarnation.
	if _, err := s.Put(PodRecord{Pod: testPod("a", "db", "uid-db-2")}); err != nil {
		t.Errorf("Put of a new uid under a deleted name: %v", err)
	}
}

func TestPutGenerationAndStatus(t *testing.T) {
	s := openTest(t, Options{})
	pod := testPod("default", "web", "uid-1")
	first := mustPut(t, s, pod)
	rev := s.Revision()

	again := mustPut(t, s, testPod("default", "web", "uid-1"))
	if s.Revision() != rev || again.Generation != 1 || again.ModRevision != first.ModRevision {
		t.Errorf("unchanged Put: revision %d -> %d, generation %d, mod revision %d -> %d", rev, s.Revision(), again.Generation, first.ModRevision, again.ModRevision)
	}

	status := &corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"}
	mustAppend(t, s, StatusChange(RefOf(pod), status))

	changed := testPod("default", "web", "uid-1")
	changed.Spec.Containers[0].Image = "busybox:1.37"
	changed.Status = corev1.PodStatus{Phase: corev1.PodFailed} // ignored by Put
	rec := mustPut(t, s, changed)
	if rec.Generation != 2 || rec.ModRevision != s.Revision() || rec.CreateRevision != first.CreateRevision || !rec.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("changed Put: generation %d, revisions create %d mod %d (store %d)", rec.Generation, rec.CreateRevision, rec.ModRevision, s.Revision())
	}
	if rec.Pod.Spec.Containers[0].Image != "busybox:1.37" {
		t.Errorf("stored image %q", rec.Pod.Spec.Containers[0].Image)
	}
	if diff := cmp.Diff(*status, rec.Pod.Status); diff != "" {
		t.Errorf("Put changed the stored status (-appended +stored):\n%s", diff)
	}
	// A new pod's status starts empty whatever the caller sends.
	p2 := testPod("default", "other", "uid-2")
	p2.Status.Phase = corev1.PodSucceeded
	if rec := mustPut(t, s, p2); rec.Pod.Status.Phase != "" {
		t.Errorf("new pod stored with phase %q", rec.Pod.Status.Phase)
	}
}

func TestPutConflicts(t *testing.T) {
	s := openTest(t, Options{})
	mustPut(t, s, testPod("default", "web", "uid-1"))
	rev := s.Revision()
	tests := []struct {
		name string
		rec  PodRecord
		want error
	}{
		{"name held by another uid", PodRecord{Pod: testPod("default", "web", "uid-2")}, errdefs.ErrPodExists},
		{"uid renamed", PodRecord{Pod: testPod("default", "web2", "uid-1")}, errdefs.ErrInvalidRecord},
		{"uid moved to another namespace", PodRecord{Pod: testPod("other", "web", "uid-1")}, errdefs.ErrInvalidRecord},
		{"no pod", PodRecord{}, errdefs.ErrInvalidRecord},
		{"no uid", PodRecord{Pod: testPod("default", "x", "")}, errdefs.ErrInvalidRecord},
		{"no name", PodRecord{Pod: testPod("default", "", "uid-3")}, errdefs.ErrInvalidRecord},
		{"nil secret", PodRecord{Pod: testPod("default", "x", "uid-3"), Secrets: []*corev1.Secret{nil}}, errdefs.ErrInvalidRecord},
		{"redacted record", PodRecord{Pod: testPod("default", "web", "uid-1"), SecretsRedacted: true}, errdefs.ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Put(tt.rec); !errors.Is(err, tt.want) {
				t.Errorf("Put: %v, want %v", err, tt.want)
			}
		})
	}
	if s.Revision() != rev {
		t.Errorf("failed Puts moved the revision from %d to %d", rev, s.Revision())
	}
	if _, err := s.MarkDeleting("uid-1", nil); err != nil {
		t.Fatalf("MarkDeleting: %v", err)
	}
	if _, err := s.Put(PodRecord{Pod: testPod("default", "web", "uid-1")}); !errors.Is(err, errdefs.ErrPodDeleting) {
		t.Errorf("Put of a deleting pod: %v, want errdefs.ErrPodDeleting", err)
	}
}

func TestSecretsRedactedByDefault(t *testing.T) {
	s := openTest(t, Options{})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "creds", Annotations: map[string]string{
			corev1.LastAppliedConfigAnnotation: `{"data":{"password":"aHVudGVyMg=="}}`,
			"team":                             "db",
		}},
		Data:       map[string][]byte{"password": []byte("hunter2")},
		StringData: map[string]string{"token": "s3cr3t"},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "conf"}, Data: map[string]string{"k": "v"}}
	pod := testPod("default", "web", "uid-1")
	put, err := s.Put(PodRecord{Pod: pod, ConfigMaps: []*corev1.ConfigMap{cm}, Secrets: []*corev1.Secret{secret}})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, err := s.MarkDeleting("uid-1", nil); err != nil {
		t.Fatalf("MarkDeleting: %v", err)
	}
	marked, err := s.MarkDeleting("uid-1", nil)
	if err != nil {
		t.Fatalf("MarkDeleting: %v", err)
	}
	got, err := s.Get("uid-1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	byName, err := s.GetByName("default", "web")
	if err != nil {
		t.Fatalf("GetByName: %v", err)
	}
	list, _, err := s.List(Filter{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for name, rec := range map[string]*PodRecord{"Put": put, "MarkDeleting": marked, "Get": got, "GetByName": byName, "List": list[0]} {
		if !rec.SecretsRedacted {
			t.Errorf("%s: SecretsRedacted is false", name)
		}
		sec := rec.Secrets[0]
		if v, ok := sec.Data["password"]; !ok || v != nil {
			t.Errorf("%s: Data[password] = %q (present %t), want the key without its value", name, v, ok)
		}
		if v, ok := sec.StringData["token"]; !ok || v != "" {
			t.Errorf("%s: StringData[token] = %q (present %t), want the key without its value", name, v, ok)
		}
		if _, ok := sec.Annotations[corev1.LastAppliedConfigAnnotation]; ok || sec.Annotations["team"] != "db" {
			t.Errorf("%s: annotations %v, want only team", name, sec.Annotations)
		}
		if rec.ConfigMaps[0].Data["k"] != "v" {
			t.Errorf("%s: ConfigMap data %v, want it whole", name, rec.ConfigMaps[0].Data)
		}
		if _, err := s.Put(*rec); !errors.Is(err, errdefs.ErrInvalidRecord) {
			t.Errorf("%s: Put of the redacted record: %v, want errdefs.ErrInvalidRecord", name, err)
		}
	}

	full, err := s.GetWithSecrets("uid-1")
	if err != nil {
		t.Fatalf("GetWithSecrets: %v", err)
	}
	if full.SecretsRedacted || string(full.Secrets[0].Data["password"]) != "hunter2" || full.Secrets[0].StringData["token"] != "s3cr3t" ||
		full.Secrets[0].Annotations[corev1.LastAppliedConfigAnnotation] == "" {
		t.Errorf("GetWithSecrets lost the data: %+v", full.Secrets[0])
	}
	// Changing what a read returned changes nothing stored.
	full.Secrets[0].Data["password"] = []byte("changed")
	again, err := s.GetWithSecrets("uid-1")
	if err != nil {
		t.Fatalf("GetWithSecrets: %v", err)
	}
	if string(again.Secrets[0].Data["password"]) != "hunter2" {
		t.Errorf("stored secret changed through a returned record")
	}
	if _, err := s.GetWithSecrets("nope"); !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("GetWithSecrets(unknown): %v, want errdefs.ErrPodNotFound", err)
	}
}

func TestMarkDeleting(t *testing.T) {
	clk := testclock.NewFakePassiveClock(t0)
	s := openTest(t, Options{Clock: clk})
	mustPut(t, s, testPod("default", "web", "uid-1"))

	rec, err := s.MarkDeleting("uid-1", nil)
	if err != nil {
		t.Fatalf("MarkDeleting: %v", err)
	}
	if !rec.Deleting || rec.Generation != 2 || rec.ModRevision != s.Revision() {
		t.Errorf("marked: deleting %t, generation %d, mod revision %d (store %d)", rec.Deleting, rec.Generation, rec.ModRevision, s.Revision())
	}
	if g := rec.Pod.DeletionGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("grace period %v, want the pod's 30", g)
	}
	if ts := rec.Pod.DeletionTimestamp; ts == nil || !ts.Time.Equal(t0.Add(30*time.Second)) {
		t.Errorf("deletion timestamp %v, want %v", ts, t0.Add(30*time.Second))
	}

	clk.SetTime(t0.Add(10 * time.Second))
	rev := s.Revision()
	longer := int64(60)
	if rec, err = s.MarkDeleting("uid-1", &longer); err != nil {
		t.Fatalf("MarkDeleting: %v", err)
	}
	if *rec.Pod.DeletionGracePeriodSeconds != 30 || s.Revision() != rev {
		t.Errorf("a longer grace period changed the record: %d s, revision %d -> %d", *rec.Pod.DeletionGracePeriodSeconds, rev, s.Revision())
	}
	shorter := int64(5)
	if rec, err = s.MarkDeleting("uid-1", &shorter); err != nil {
		t.Fatalf("MarkDeleting: %v", err)
	}
	if *rec.Pod.DeletionGracePeriodSeconds != 5 || !rec.Pod.DeletionTimestamp.Time.Equal(t0.Add(5*time.Second)) {
		t.Errorf("shortened: %d s, deadline %v, want 5 s from the first request (%v)", *rec.Pod.DeletionGracePeriodSeconds, rec.Pod.DeletionTimestamp, t0.Add(5*time.Second))
	}
	negative := int64(-1)
	if _, err := s.MarkDeleting("uid-1", &negative); !errors.Is(err, errdefs.ErrInvalidRecord) {
		t.Errorf("negative grace: %v, want errdefs.ErrInvalidRecord", err)
	}
	if _, err := s.MarkDeleting("nope", nil); !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("MarkDeleting(unknown): %v, want errdefs.ErrPodNotFound", err)
	}
}

func TestFileModeAndDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "root", "state")
	path := filepath.Join(dir, "podsync.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkMode(t, dir, 0o700|os.ModeDir)
	checkMode(t, path, 0o600)

	// A file left readable by others is tightened on open.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkMode(t, path, 0o600)
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (os.ModeDir | os.ModePerm); got != want {
		t.Errorf("%s: mode %v, want %v", path, got, want)
	}
}

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	openAt(t, path, Options{})
	start := time.Now()
	s, err := Open(path, Options{LockTimeout: 200 * time.Millisecond})
	if err == nil {
		_ = s.Close()
		t.Fatal("second Open of a held file succeeded")
	}
	if !errors.Is(err, errdefs.ErrStoreLocked) || !strings.Contains(err.Error(), path) {
		t.Errorf("second Open: %v, want errdefs.ErrStoreLocked naming %s", err, path)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("second Open waited %v for the lock", waited)
	}
}

func TestOpenCorrupt(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"text", []byte(strings.Repeat("this is not a bbolt file\n", 1000))},
		{"short", []byte("xx")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "podsync.db")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, Options{})
			if err == nil {
				_ = s.Close()
				t.Fatal("Open of a corrupt file succeeded")
			}
			if !errors.Is(err, errdefs.ErrStoreCorrupt) || !strings.Contains(err.Error(), path) {
				t.Errorf("Open: %v, want errdefs.ErrStoreCorrupt naming %s", err, path)
			}
		})
	}
}

func TestReopenKeepsPods(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	s, err := Open(path, Options{Clock: testclock.NewFakePassiveClock(t0)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	pod := testPod("default", "web", "uid-1")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"}, Data: map[string][]byte{"k": []byte("v")}}
	if _, err := s.Put(PodRecord{Pod: pod, Secrets: []*corev1.Secret{secret}}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	mustAppend(t, s, StatusChange(RefOf(pod), &corev1.PodStatus{Phase: corev1.PodRunning}))
	before, err := s.GetWithSecrets("uid-1")
	if err != nil {
		t.Fatalf("GetWithSecrets: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Get("uid-1"); !errors.Is(err, errdefs.ErrStoreClosed) {
		t.Errorf("Get after Close: %v, want errdefs.ErrStoreClosed", err)
	}
	if _, err := s.Put(PodRecord{Pod: pod}); !errors.Is(err, errdefs.ErrStoreClosed) {
		t.Errorf("Put after Close: %v, want errdefs.ErrStoreClosed", err)
	}
	if _, err := s.Watch(t.Context(), 0); !errors.Is(err, errdefs.ErrStoreClosed) {
		t.Errorf("Watch after Close: %v, want errdefs.ErrStoreClosed", err)
	}

	s2 := openAt(t, path, Options{})
	after, err := s2.GetWithSecrets("uid-1")
	if err != nil {
		t.Fatalf("GetWithSecrets after reopen: %v", err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("record changed across reopen (-before +after):\n%s", diff)
	}
}

// TestPutRecordCap: a record over Options.MaxRecordBytes is refused with
// ErrRecordTooLarge (an ErrInvalidSpec) and a field error naming its size
// and the cap, before anything is written: a new pod is not stored, a
// stored one keeps its record, and the revision does not move.
func TestPutRecordCap(t *testing.T) {
	const limit = 64 << 10
	s := openTest(t, Options{MaxRecordBytes: limit})
	cm := func(n int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cfg"},
			Data: map[string]string{"blob": strings.Repeat("x", n)}}
	}
	small := testPod("default", "small", "uid-small")
	if _, err := s.Put(PodRecord{Pod: small, ConfigMaps: []*corev1.ConfigMap{cm(limit / 2)}}); err != nil {
		t.Fatalf("Put under the cap: %v", err)
	}
	rev := s.Revision()
	for _, tc := range []struct {
		name string
		rec  PodRecord
	}{
		{"new pod with a big ConfigMap", PodRecord{Pod: testPod("default", "big", "uid-big"), ConfigMaps: []*corev1.ConfigMap{cm(limit)}}},
		{"new pod with a big Secret", PodRecord{Pod: testPod("default", "big", "uid-big"), Secrets: []*corev1.Secret{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"}, Data: map[string][]byte{"k": make([]byte, limit)}}}}},
		{"stored pod grown past the cap", PodRecord{Pod: small, ConfigMaps: []*corev1.ConfigMap{cm(2 * limit)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Put(tc.rec)
			var fe *field.Error
			if !errors.Is(err, errdefs.ErrRecordTooLarge) || !errors.Is(err, errdefs.ErrInvalidSpec) || !errors.As(err, &fe) {
				t.Fatalf("Put = %v, want ErrRecordTooLarge with a field error", err)
			}
			if fe.Type != field.ErrorTypeTooLong || !strings.Contains(fe.Detail, fmt.Sprint(limit)) || !strings.Contains(err.Error(), "bytes") {
				t.Errorf("field error %+v, want TooLong naming the size and the cap %d", fe, limit)
			}
			if s.Revision() != rev {
				t.Errorf("revision %d after the refusal, want %d", s.Revision(), rev)
			}
		})
	}
	if _, err := s.Get("uid-big"); !errors.Is(err, errdefs.ErrPodNotFound) {
		t.Errorf("Get of the refused pod: %v, want ErrPodNotFound", err)
	}
	got, err := s.GetWithSecrets("uid-small")
	if err != nil || len(got.ConfigMaps) != 1 || len(got.ConfigMaps[0].Data["blob"]) != limit/2 {
		t.Errorf("the stored pod after a refused update: %v, want its old ConfigMap", err)
	}
}

// TestDeletedTombstones: Delete records that the store removed the pod
// until ForgetDeleted forgets it, which spares the pods keep keeps and
// deletions after the revision it is given.
func TestDeletedTombstones(t *testing.T) {
	s := openTest(t, Options{})
	a, b, c := testPod("default", "a", "uid-a"), testPod("default", "b", "uid-b"), testPod("default", "c", "uid-c")
	for _, p := range []*corev1.Pod{a, b, c} {
		mustPut(t, s, p)
	}
	deleted := func(uid types.UID) bool {
		t.Helper()
		ok, err := s.Deleted(uid)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if deleted("uid-a") {
		t.Errorf("a stored pod is Deleted")
	}
	for _, uid := range []types.UID{"uid-a", "uid-b"} {
		if _, err := s.Delete(uid); err != nil {
			t.Fatal(err)
		}
	}
	rev := s.Revision()
	if _, err := s.Delete("uid-c"); err != nil {
		t.Fatal(err)
	}
	if !deleted("uid-a") || !deleted("uid-b") || !deleted("uid-c") || deleted("uid-never") {
		t.Errorf("Deleted after Delete: a %t b %t c %t never %t", deleted("uid-a"), deleted("uid-b"), deleted("uid-c"), deleted("uid-never"))
	}
	n, err := s.ForgetDeleted(rev, func(uid types.UID) bool { return uid == "uid-b" })
	if err != nil || n != 1 {
		t.Fatalf("ForgetDeleted = %d, %v, want 1 forgotten", n, err)
	}
	if deleted("uid-a") || !deleted("uid-b") || !deleted("uid-c") {
		t.Errorf("after ForgetDeleted: a %t b %t c %t, want only a forgotten", deleted("uid-a"), deleted("uid-b"), deleted("uid-c"))
	}
}
