package server

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/store"
)

// freshPodToProto is recordToProto as it was before podCache and without
// it: the reference the cached messages must equal.
func freshPodToProto(s *service, rec *store.PodRecord, sb sandboxRef) *podsyncv1.Pod {
	p := convert.StoredPodToProto(rec.Pod)
	p.Status = s.statusToProto(&rec.Pod.Status, nil, sandboxRef{})
	if sb.id != "" {
		p.Status.SandboxId, p.Status.SandboxAttempt = sb.id, sb.attempt
	}
	if p.Metadata.CreationTimestamp == nil && !rec.CreatedAt.IsZero() {
		p.Metadata.CreationTimestamp = timestamppb.New(rec.CreatedAt)
	}
	return p
}

// wantSameMessage fails unless got and want marshal to the same bytes.
func wantSameMessage(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	det := proto.MarshalOptions{Deterministic: true}
	g, err := det.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := det.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) || string(g) != string(w) {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func sharedRecord(t *testing.T, s *service, namespace, name string) *store.PodRecord {
	t.Helper()
	rec, err := s.cur.Load().Pods.GetShared(t.Context(), namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestPodCacheEqualsFreshConversion: for every pod of testdata/manifests,
// with and without a status and a sandbox, recordToProto's message (a
// conversion, then the cached one) is the message a fresh conversion
// makes, to the byte.
func TestPodCacheEqualsFreshConversion(t *testing.T) {
	s, st := storedPodsService(t, 0)
	files, err := filepath.Glob("../testdata/manifests/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("manifests: %v, %v", files, err)
	}
	var pods []*corev1.Pod
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := convert.Decode(r)
		_ = r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, pod := range m.Pods {
			// A namespace per file: names repeat across the manifests.
			pod.Namespace, pod.UID = strings.TrimSuffix(filepath.Base(f), ".yaml"), ""
			convert.Default(pod)
			if _, err := st.Put(store.PodRecord{Pod: pod}); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(pods)%2 == 1 {
				if _, err := st.Append(store.StatusChange(store.RefOf(pod), runningStatus(pod, 3))); err != nil {
					t.Fatal(err)
				}
			}
			pods = append(pods, pod)
		}
	}
	for i, pod := range pods {
		rec := sharedRecord(t, s, pod.Namespace, pod.Name)
		var sb sandboxRef
		if i%3 == 0 {
			sb = sandboxRef{id: fmt.Sprintf("sandbox-%d", i), attempt: uint32(i)}
		}
		want := freshPodToProto(s, rec, sb)
		first := s.cachedPodToProto(rec, sb)
		wantSameMessage(t, pod.Namespace+"/"+pod.Name+" converted", first, want)
		second := s.cachedPodToProto(rec, sb)
		if second != first {
			t.Errorf("%s/%s: converted again, not cached", pod.Namespace, pod.Name)
		}
		wantSameMessage(t, pod.Namespace+"/"+pod.Name+" cached", second, want)
	}

	// ListPods and GetPod return the messages of the records they read.
	resp, err := s.ListPods(t.Context(), &podsyncv1.ListPodsRequest{})
	if err != nil || len(resp.GetPods()) != len(pods) {
		t.Fatalf("ListPods: %d pods, %v; want %d", len(resp.GetPods()), err, len(pods))
	}
	for _, p := range resp.GetPods() {
		md := p.GetMetadata()
		rec := sharedRecord(t, s, md.GetNamespace(), md.GetName())
		wantSameMessage(t, "ListPods "+md.GetNamespace()+"/"+md.GetName(), p, freshPodToProto(s, rec, sandboxRef{}))
		got, err := s.GetPod(t.Context(), &podsyncv1.GetPodRequest{Namespace: md.GetNamespace(), Name: md.GetName()})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetPod() != p {
			t.Errorf("GetPod %s/%s converted again the pod ListPods returned", md.GetNamespace(), md.GetName())
		}
	}
}

// TestPodCacheFollowsChanges: a new status, a spec change and a deletion
// mark (new records), and a new sandbox or attempt (same record) each give
// the new message, never the cached one.
func TestPodCacheFollowsChanges(t *testing.T) {
	s, st := storedPodsService(t, 1)
	ctx := t.Context()
	get := func() *podsyncv1.Pod {
		t.Helper()
		resp, err := s.GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: "bench", Name: "pod-000"})
		if err != nil {
			t.Fatal(err)
		}
		list, err := s.ListPods(ctx, &podsyncv1.ListPodsRequest{})
		if err != nil || len(list.GetPods()) != 1 {
			t.Fatalf("ListPods: %v, %v", list, err)
		}
		if list.GetPods()[0] != resp.GetPod() {
			t.Error("GetPod and ListPods of the same record: two conversions")
		}
		return resp.GetPod()
	}
	before := get()
	if again := get(); again != before {
		t.Error("unchanged pod converted again")
	}
	rec := sharedRecord(t, s, "bench", "pod-000")

	if _, err := st.Append(store.StatusChange(rec.Ref(), runningStatus(rec.Pod, 1))); err != nil {
		t.Fatal(err)
	}
	p := get()
	if n := p.GetStatus().GetContainerStatuses()[0].GetRestartCount(); n != 1 {
		t.Errorf("after a status change: restart count %d, want 1", n)
	}

	next := rec.Pod.DeepCopy()
	next.Spec.Containers[0].Image = "registry.local/busybox:2"
	if _, err := st.Put(store.PodRecord{Pod: next}); err != nil {
		t.Fatal(err)
	}
	p = get()
	if img := p.GetSpec().GetContainers()[0].GetImage(); img != "registry.local/busybox:2" {
		t.Errorf("after a spec change: image %q", img)
	}
	if n := p.GetStatus().GetContainerStatuses()[0].GetRestartCount(); n != 1 {
		t.Errorf("after a spec change: restart count %d, want 1 still", n)
	}

	if _, err := st.MarkDeleting(rec.Pod.UID, nil); err != nil {
		t.Fatal(err)
	}
	p = get()
	if p.GetMetadata().GetDeletionTimestamp() == nil {
		t.Error("after MarkDeleting: no deletionTimestamp")
	}

	// The sandbox is the worker's: it changes with the same record.
	rec = sharedRecord(t, s, "bench", "pod-000")
	for _, sb := range []sandboxRef{{id: "sb-1"}, {id: "sb-1", attempt: 1}, {id: "sb-2", attempt: 1}, {}} {
		p := s.cachedPodToProto(rec, sb)
		if p.GetStatus().GetSandboxId() != sb.id || p.GetStatus().GetSandboxAttempt() != sb.attempt {
			t.Errorf("sandbox %+v: got %q attempt %d", sb, p.GetStatus().GetSandboxId(), p.GetStatus().GetSandboxAttempt())
		}
		wantSameMessage(t, fmt.Sprintf("sandbox %+v", sb), p, freshPodToProto(s, rec, sb))
	}
}

// TestPodCacheConcurrentReads: GetPod and ListPods, each response
// marshalled by gRPC's codec (which reuses the size it computed first), run
// while statuses change. Every response decodes back to itself, and a read
// that starts after a write completed sees that write or a later one: the
// cache never answers with a message older than the record read (run with
// -race).
func TestPodCacheConcurrentReads(t *testing.T) {
	const pods, writes = 10, 40
	s, st := storedPodsService(t, pods)
	ctx := t.Context()
	codec := encoding.GetCodecV2(grpcproto.Name)
	var written atomic.Int32 // the restart count every pod has at least
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	stop := make(chan struct{})
	// check marshals resp as gRPC sends it and checks its pods.
	check := func(resp proto.Message, pods []*podsyncv1.Pod, floor int32) error {
		data, err := codec.Marshal(resp)
		if err != nil {
			return err
		}
		back := resp.ProtoReflect().New().Interface()
		err = proto.Unmarshal(data.Materialize(), back)
		data.Free()
		if err != nil {
			return err
		}
		if !proto.Equal(back, resp) {
			return fmt.Errorf("response decoded as %v, sent %v", back, resp)
		}
		for _, p := range pods {
			if n := p.GetStatus().GetContainerStatuses()[0].GetRestartCount(); n < floor {
				return fmt.Errorf("%s: restart count %d, after the write of %d", p.GetMetadata().GetName(), n, floor)
			}
		}
		return nil
	}
	reader := func(list bool) {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			floor := written.Load()
			var err error
			if list {
				var resp *podsyncv1.ListPodsResponse
				if resp, err = s.ListPods(ctx, &podsyncv1.ListPodsRequest{}); err == nil {
					err = check(resp, resp.GetPods(), floor)
				}
			} else {
				var resp *podsyncv1.GetPodResponse
				req := &podsyncv1.GetPodRequest{Namespace: "bench", Name: fmt.Sprintf("pod-%03d", i%pods)}
				if resp, err = s.GetPod(ctx, req); err == nil {
					err = check(resp, []*podsyncv1.Pod{resp.GetPod()}, floor)
				}
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}
	for i := range 4 {
		wg.Add(1)
		go reader(i%2 == 0)
	}
	for n := int32(1); n <= writes; n++ {
		changes := make([]store.Change, pods)
		for i := range changes {
			rec := sharedRecord(t, s, "bench", fmt.Sprintf("pod-%03d", i))
			changes[i] = store.StatusChange(rec.Ref(), runningStatus(rec.Pod, n))
		}
		if _, err := st.Append(changes...); err != nil {
			t.Fatal(err)
		}
		written.Store(n)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	resp, err := s.ListPods(ctx, &podsyncv1.ListPodsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.GetPods() {
		rec := sharedRecord(t, s, "bench", p.GetMetadata().GetName())
		wantSameMessage(t, "after the writes "+p.GetMetadata().GetName(), p, freshPodToProto(s, rec, sandboxRef{}))
	}
}

// TestPodCacheForgetsDeadRecords: an entry leaves once its record is
// garbage — the store holds a newer version of the pod, or forgot the
// deleted pod — so the cache holds nothing of pods gone.
func TestPodCacheForgetsDeadRecords(t *testing.T) {
	s, st := storedPodsService(t, 3)
	for i := range 3 {
		s.recordToProto(s.cur.Load().Pods, sharedRecord(t, s, "bench", fmt.Sprintf("pod-%03d", i)))
	}
	if n := s.pods.len(); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
	rec := sharedRecord(t, s, "bench", "pod-000")
	uid := rec.Pod.UID
	if _, err := st.Delete(uid); err != nil {
		t.Fatal(err)
	}
	// A new status of pod-001 makes a new record on its next read.
	one := sharedRecord(t, s, "bench", "pod-001")
	status := one.Pod.Status.DeepCopy()
	status.Message = "changed"
	if _, err := st.Append(store.StatusChange(store.RefOf(one.Pod), status)); err != nil {
		t.Fatal(err)
	}
	newer := sharedRecord(t, s, "bench", "pod-001")
	deadline := time.Now().Add(5 * time.Second)
	for s.pods.len() > 1 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.pods.len(); n != 1 {
		t.Fatalf("%d entries after the deletion and the new status, want 1 (pod-002's)", n)
	}
	wantSameMessage(t, "pod-001 after its new status", s.recordToProto(s.cur.Load().Pods, newer), freshPodToProto(s, newer, sandboxRef{}))
}
