package server

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// TestPodCodecKnowsEveryField: podCodec writes GetPodResponse and
// ListPodsResponse itself, so a field added to either must be added to
// it too.
func TestPodCodecKnowsEveryField(t *testing.T) {
	for _, m := range []proto.Message{&podsyncv1.GetPodResponse{}, &podsyncv1.ListPodsResponse{}} {
		fields := m.ProtoReflect().Descriptor().Fields()
		if fields.Len() != 2 {
			t.Errorf("%T has %d fields; podCodec writes 2", m, fields.Len())
		}
		pods := fields.ByNumber(fieldResponsePods)
		if pods == nil || pods.Kind() != protoreflect.MessageKind || pods.Message().FullName() != (&podsyncv1.Pod{}).ProtoReflect().Descriptor().FullName() {
			t.Errorf("%T field %d is %v; podCodec writes it as the pod messages", m, fieldResponsePods, pods)
		}
		rev := fields.ByNumber(fieldResponseRevision)
		if rev == nil || rev.Kind() != protoreflect.Int64Kind || rev.HasPresence() || rev.IsList() {
			t.Errorf("%T field %d is %v; podCodec writes it as a plain int64", m, fieldResponseRevision, rev)
		}
	}
}

// TestPodCodecWritesWhatProtoWrites: responses of cached pods, of pods
// the cache does not hold, of both, with and without a revision, decode
// to the messages the handlers returned, byte for byte as grpc's proto
// codec writes them (deterministic maps aside); a cached pod's encoding
// is made once; anything else is grpc's codec's.
func TestPodCodecWritesWhatProtoWrites(t *testing.T) {
	s, _ := storedPodsService(t, 5)
	codec := newPodCodec(s)
	list, err := s.ListPods(t.Context(), &podsyncv1.ListPodsRequest{})
	if err != nil || len(list.GetPods()) != 5 {
		t.Fatalf("ListPods: %v, %v", list, err)
	}
	cached := list.GetPods()
	uncached := proto.CloneOf(cached[2])
	uncached.Metadata.Name = "not-cached"

	cases := []struct {
		name string
		msg  proto.Message
	}{
		{"ListPods, cached pods", list},
		{"ListPods, revision 0", &podsyncv1.ListPodsResponse{Pods: cached}},
		{"ListPods, no pods", &podsyncv1.ListPodsResponse{Revision: 7}},
		{"ListPods, empty", &podsyncv1.ListPodsResponse{}},
		{"ListPods, a pod not cached", &podsyncv1.ListPodsResponse{Pods: append([]*podsyncv1.Pod{uncached}, cached...), Revision: 1 << 40}},
		{"GetPod, cached", &podsyncv1.GetPodResponse{Pod: cached[1], Revision: 3}},
		{"GetPod, not cached", &podsyncv1.GetPodResponse{Pod: uncached, Revision: 3}},
		{"GetPod, revision 0", &podsyncv1.GetPodResponse{Pod: cached[0]}},
		{"GetPod, no pod", &podsyncv1.GetPodResponse{Revision: 3}},
		{"another message", &podsyncv1.DeletePodRequest{Namespace: "bench", Name: "pod-000"}},
	}
	std := encoding.GetCodecV2(grpcproto.Name)
	for _, tc := range cases {
		got, err := codec.Marshal(tc.msg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want, err := std.Marshal(tc.msg)
		if err != nil {
			t.Fatal(err)
		}
		gotBytes, wantBytes := got.Materialize(), want.Materialize()
		got.Free()
		want.Free()
		if len(gotBytes) != len(wantBytes) {
			t.Errorf("%s: %d bytes, grpc's codec writes %d", tc.name, len(gotBytes), len(wantBytes))
		}
		back := tc.msg.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(gotBytes, back); err != nil {
			t.Fatalf("%s: decode: %v", tc.name, err)
		}
		wantSameMessage(t, tc.name, back, tc.msg)
	}

	// Each cached pod is encoded once, whichever response needs it.
	for _, p := range cached {
		a, b := s.podEncoding(p), s.podEncoding(p)
		if a == nil || &a[0] != &b[0] {
			t.Errorf("%s: encoded again", p.GetMetadata().GetName())
		}
		if want, _ := proto.Marshal(p); len(a) != len(want) {
			t.Errorf("%s: cached encoding of %d bytes, the message's is %d", p.GetMetadata().GetName(), len(a), len(want))
		}
	}
	if s.podEncoding(uncached) != nil {
		t.Error("a message the cache does not hold has a cached encoding")
	}

	// A nil pod in a list is written as grpc's codec writes it.
	withNil := &podsyncv1.ListPodsResponse{Pods: []*podsyncv1.Pod{cached[0], nil}}
	got, gotErr := codec.Marshal(withNil)
	want, wantErr := std.Marshal(withNil)
	if (gotErr == nil) != (wantErr == nil) || (gotErr == nil && !bytes.Equal(got.Materialize(), want.Materialize())) {
		t.Errorf("a nil pod: %v, grpc's codec: %v", gotErr, wantErr)
	}
}
