package server

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// podEncodings is the optional capability of a service to hand out the
// protobuf encodings of the pod messages it shares between responses
// (Service has it, from its podCache).
type podEncodings interface {
	podEncoding(pod *podsyncv1.Pod) []byte
}

// Field numbers of GetPodResponse and ListPodsResponse, which podCodec
// writes itself: the pod (or pods) and the revision. A test pins them to
// the messages' descriptors, and that the messages have no other field.
const (
	fieldResponsePods     protowire.Number = 1
	fieldResponseRevision protowire.Number = 2
)

// podCodec is grpc's proto codec with one shortcut: it writes a GetPod or
// ListPods response from the encodings of its pods that the service keeps
// beside the shared messages, instead of encoding each pod again for each
// response. Encoding the 250 pods of a ListPods response was two thirds
// of the call's CPU under load. The bytes are those grpc's codec would
// write: each pod as a length-delimited field 1, then the revision as
// field 2 when it is not zero, as Go's protobuf orders a message's fields.
// A pod the service does not cache is encoded here; every other message,
// and every decoding, is grpc's codec's.
type podCodec struct {
	encoding.CodecV2
	pods podEncodings
}

func newPodCodec(pods podEncodings) podCodec {
	return podCodec{CodecV2: encoding.GetCodecV2(grpcproto.Name), pods: pods}
}

// Marshal writes GetPod and ListPods responses from the pods' encodings,
// and anything else as grpc's proto codec.
func (c podCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *podsyncv1.ListPodsResponse:
		if m != nil {
			return c.marshalPods(m.Pods, m.Revision, v)
		}
	case *podsyncv1.GetPodResponse:
		if m != nil && m.Pod != nil {
			return c.marshalPods([]*podsyncv1.Pod{m.Pod}, m.Revision, v)
		}
	}
	return c.CodecV2.Marshal(v)
}

// marshalPods writes a response of pods and revision; v is the response,
// which grpc's codec writes when a pod cannot be encoded here (a nil pod,
// whose error is then the codec's).
func (c podCodec) marshalPods(pods []*podsyncv1.Pod, rev int64, v any) (mem.BufferSlice, error) {
	encs := make([][]byte, len(pods))
	size := 0
	for i, p := range pods {
		if p == nil {
			return c.CodecV2.Marshal(v)
		}
		b := c.pods.podEncoding(p)
		if b == nil {
			var err error
			if b, err = proto.Marshal(p); err != nil {
				return c.CodecV2.Marshal(v)
			}
		}
		encs[i] = b
		size += protowire.SizeTag(fieldResponsePods) + protowire.SizeBytes(len(b))
	}
	if rev != 0 {
		size += protowire.SizeTag(fieldResponseRevision) + protowire.SizeVarint(uint64(rev))
	}
	var (
		buf  *[]byte
		pool mem.BufferPool
	)
	if mem.IsBelowBufferPoolingThreshold(size) {
		b := make([]byte, 0, size)
		buf = &b
	} else {
		pool = mem.DefaultBufferPool()
		buf = pool.Get(size)
	}
	b := (*buf)[:0]
	for _, enc := range encs {
		b = protowire.AppendTag(b, fieldResponsePods, protowire.BytesType)
		b = protowire.AppendBytes(b, enc)
	}
	if rev != 0 {
		b = protowire.AppendTag(b, fieldResponseRevision, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(rev))
	}
	*buf = b
	if pool == nil {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}
