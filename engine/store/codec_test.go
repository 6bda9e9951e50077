package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/podsync/podsync/engine/errdefs"
)

// manifestRecords returns a record for each pod of the repository's
// example manifests (testdata/manifests), with the ConfigMaps and Secrets
// of its file, a status with times, conditions and container states, and
// the store's fields set.
func manifestRecords(t *testing.T) map[string]*PodRecord {
	t.Helper()
	files, err := filepath.Glob("../../testdata/manifests/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata/manifests: %v, %d files", err, len(files))
	}
	created := time.Date(2026, 12, 7, 3, 4, 5, 123456789, time.UTC)
	now := metav1.NewTime(created.Add(3 * time.Second).Truncate(time.Second))
	out := map[string]*PodRecord{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var pods []*corev1.Pod
		var cms []*corev1.ConfigMap
		var secrets []*corev1.Secret
		for _, doc := range strings.Split(string(data), "\n---") {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var obj any
			switch tm.Kind {
			case "Pod":
				pods = append(pods, &corev1.Pod{})
				obj = pods[len(pods)-1]
			case "ConfigMap":
				cms = append(cms, &corev1.ConfigMap{})
				obj = cms[len(cms)-1]
			case "Secret":
				secrets = append(secrets, &corev1.Secret{})
				obj = secrets[len(secrets)-1]
			default:
				continue
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		for i, pod := range pods {
			pod.UID = types.UID("uid-" + pod.Name)
			pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "192.0.2.10", PodIP: "10.88.0.5",
				PodIPs: []corev1.PodIP{{IP: "10.88.0.5"}}, StartTime: &now, QOSClass: corev1.PodQOSBestEffort,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
			for _, c := range pod.Spec.Containers {
				pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
					Name: c.Name, Image: c.Image, ImageID: "sha256:0123", ContainerID: "containerd://abc", Ready: true, RestartCount: 2,
					State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", StartedAt: now, FinishedAt: now}},
					AllocatedResources:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
				})
			}
			rec := &PodRecord{Pod: pod, ConfigMaps: cms, Secrets: secrets, Generation: int64(3 + i), CreatedAt: created,
				CreateRevision: 7, ModRevision: 19}
			if i%2 == 1 {
				grace := int64(30)
				rec.Deleting, rec.Pod.DeletionTimestamp, rec.Pod.DeletionGracePeriodSeconds = true, &now, &grace
			}
			out[filepath.Base(f)+"/"+pod.Name] = rec
		}
	}
	if len(out) < 10 {
		t.Fatalf("%d pods in testdata/manifests, want more", len(out))
	}
	return out
}

// TestRecordCodec: a record written in schema 2's encoding reads back as
// the same record schema 1's JSON read back, for every pod of the example
// manifests, their ConfigMaps and Secrets; and the encoding is the same
// each time, as Put's no-change check needs.
func TestRecordCodec(t *testing.T) {
	for name, rec := range manifestRecords(t) {
		t.Run(name, func(t *testing.T) {
			legacy, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			want, err := decodeRecord(legacy)
			if err != nil {
				t.Fatalf("decode JSON: %v", err)
			}
			data, err := encodeRecord(rec)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, recordMagic) {
				t.Fatalf("encoded record starts %q, want the magic %q", data[:4], recordMagic)
			}
			got, err := decodeRecord(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("decoded record differs from JSON's (-json +protobuf):\n%s", diff)
			}
			again, err := encodeRecord(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, again) {
				t.Errorf("a decoded record encodes to other bytes")
			}
			if len(data) >= len(legacy) {
				t.Errorf("encoded record is %d bytes, JSON %d", len(data), len(legacy))
			}
		})
	}
}

// TestRecordCodecDamage: a record cut anywhere, or with a byte changed in
// its envelope, fails to decode with an error, never a panic.
func TestRecordCodecDamage(t *testing.T) {
	rec := manifestRecords(t)["volumes.yaml/volumes"]
	if rec == nil {
		t.Fatal("no pod volumes in testdata/manifests/volumes.yaml")
	}
	data, err := encodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	for n := len(recordMagic); n < len(data); n++ {
		if _, err := decodeRecord(data[:n]); err == nil && n < len(data)-1 {
			// A cut between two of the envelope's fields can decode:
			// the fields after it are then missing.
			got, _ := decodeRecord(data[:n])
			if got.ModRevision == rec.ModRevision {
				t.Errorf("record cut to %d of %d bytes decodes whole", n, len(data))
			}
		}
	}
	for _, b := range []byte{0x00, 0x07, 0xff} {
		d := bytes.Clone(data)
		d[len(recordMagic)] = b
		if _, err := decodeRecord(d); err == nil {
			t.Errorf("record with its first tag %#x decodes", b)
		}
	}
}

// TestOpenSchema1Store: a store of schema 1, its records JSON, opens; its
// pods read as they were stored; a Put of the same pod is no change; a
// record rewritten is in schema 2's encoding, and the file is marked
// schema 2, which a podsync of schema 1 refuses.
func TestOpenSchema1Store(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	web, db := testPod("shop", "web", "uid-web"), testPod("shop", "db", "uid-db")
	mustPut(t, s, web)
	mustPut(t, s, db)
	want := map[types.UID]*PodRecord{}
	// Rewrite the file as schema 1 wrote it.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		pods := tx.Bucket(bucketPods)
		for _, uid := range []types.UID{web.UID, db.UID} {
			rec, err := decodeRecord(pods.Get([]byte(uid)))
			if err != nil {
				return err
			}
			want[uid] = rec
			data, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			if err := pods.Put([]byte(uid), data); err != nil {
				return err
			}
		}
		return putInt(tx.Bucket(bucketMeta), keySchema, 1)
	}); err != nil {
		t.Fatal(err)
	}
	rev := s.Revision()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path, Options{})
	stored := func(uid types.UID) []byte {
		var out []byte
		if err := s.db.View(func(tx *bolt.Tx) error {
			out = bytes.Clone(tx.Bucket(bucketPods).Get([]byte(uid)))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if b := stored(web.UID); !bytes.HasPrefix(b, []byte("{")) {
		t.Fatalf("web's record is not JSON after a reopen: %q", b[:8])
	}
	for uid, w := range want {
		got, err := s.Get(uid)
		if err != nil {
			t.Fatal(err)
		}
		w.SecretsRedacted = true
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("pod %s from a schema 1 record (-want +got):\n%s", uid, diff)
		}
	}
	// The same pod again changes nothing.
	rec, err := s.Put(PodRecord{Pod: testPod("shop", "web", "uid-web")})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Generation != want[web.UID].Generation || s.Revision() != rev {
		t.Errorf("the same pod Put on a schema 1 record: generation %d (was %d), revision %d (was %d)",
			rec.Generation, want[web.UID].Generation, s.Revision(), rev)
	}
	// A status rewrites the record in schema 2.
	mustAppend(t, s, Change{Kind: KindStatus, Pod: RefOf(db), Status: &corev1.PodStatus{Phase: corev1.PodRunning}})
	if b := stored(db.UID); !bytes.HasPrefix(b, recordMagic) {
		t.Errorf("db's record after a status is not in schema 2's encoding: %q", b[:8])
	}
	if got, err := s.Get(db.UID); err != nil || got.Pod.Status.Phase != corev1.PodRunning {
		t.Errorf("db after its status: %v, %v", got, err)
	}
	var schema int64
	if err := s.db.View(func(tx *bolt.Tx) error { schema = getInt(tx.Bucket(bucketMeta), keySchema); return nil }); err != nil {
		t.Fatal(err)
	}
	if schema != schemaVersion || schemaVersion != 2 {
		t.Errorf("schema %d after the reopen, want 2", schema)
	}
}

// TestOpenNewerSchema: a store of a later podsync's schema, whose records
// this one cannot decode, is refused as newer, not as corrupt, naming both
// versions, and left as it is.
func TestOpenNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, testPod("shop", "web", "uid-web"))
	// A later schema's record, which this podsync cannot decode.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPods).Put([]byte("uid-web"), []byte("psr\x01 a later encoding")); err != nil {
			return err
		}
		return putInt(tx.Bucket(bucketMeta), keySchema, schemaVersion+1)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err == nil {
		_ = s.Close()
		t.Fatal("Open of a store of a newer schema succeeded")
	}
	if want := "schema version 3 is newer than this podsync's (2)"; !strings.Contains(err.Error(), want) || errors.Is(err, errdefs.ErrStoreCorrupt) {
		t.Errorf("Open: %v, want it to say %q, and not that the file is corrupt", err, want)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the refused store file was written to")
	}
}

// TestSameStatus: statuses are the same as the store keeps them: times to
// the second, an empty list as none; any field changed is a change.
func TestSameStatus(t *testing.T) {
	at := time.Date(2026, 12, 7, 3, 4, 5, 0, time.UTC)
	base := func() *corev1.PodStatus {
		return &corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.88.0.5", StartTime: &metav1.Time{Time: at},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, RestartCount: 1,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}}}
	}
	for _, tc := range []struct {
		name   string
		change func(*corev1.PodStatus)
		same   bool
	}{
		{"unchanged", func(*corev1.PodStatus) {}, true},
		{"a time within its second", func(s *corev1.PodStatus) { s.StartTime = &metav1.Time{Time: at.Add(900 * time.Millisecond)} }, true},
		{"an empty list for none", func(s *corev1.PodStatus) { s.InitContainerStatuses = []corev1.ContainerStatus{} }, true},
		{"a time a second later", func(s *corev1.PodStatus) { s.StartTime = &metav1.Time{Time: at.Add(time.Second)} }, false},
		{"phase", func(s *corev1.PodStatus) { s.Phase = corev1.PodSucceeded }, false},
		{"a container's readiness", func(s *corev1.PodStatus) { s.ContainerStatuses[0].Ready = false }, false},
		{"a restart", func(s *corev1.PodStatus) { s.ContainerStatuses[0].RestartCount = 2 }, false},
		{"a condition's reason", func(s *corev1.PodStatus) { s.Conditions[0].Reason = "PodCompleted" }, false},
		{"no start time", func(s *corev1.PodStatus) { s.StartTime = nil }, false},
	} {
		b := base()
		tc.change(b)
		if got := SameStatus(base(), b); got != tc.same {
			t.Errorf("%s: SameStatus = %v, want %v", tc.name, got, tc.same)
		}
	}
}
