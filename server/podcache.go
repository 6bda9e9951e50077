package server

import (
	"runtime"
	"sync"
	"weak"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// podCache holds the API message recordToProto made of each stored pod,
// so that GetPod and ListPods convert a pod only when it changed: that
// conversion was a third of ListPods' CPU time.
//
// An entry is keyed by the pod's UID and serves only the record it was
// made of, compared by pointer, and the same sandbox. The store hands out
// one shared record per version of a pod's bytes (Node.ListShared and
// Node.GetShared), and any write — a status, a spec, a deletion mark —
// makes a new record, so a pointer names a version. The sandbox, the
// worker's and not the record's, can change without a write.
//
// An entry holds its record weakly and leaves when the record is garbage:
// once the store holds a newer version of the pod, or has forgotten the
// deleted pod, and no response uses it. So the cache holds at most one
// message per pod the store holds, and none of pods gone; a weak pointer
// also cannot come to name another record.
//
// The messages are shared by every response that returns them, marshalled
// concurrently: nothing may change a message once it is in the cache.
// Handlers only put them in responses, and no interceptor changes
// responses (grpc.go). Marshalling only fills the messages' size caches,
// atomically and with the same sizes whichever call fills them.
type podCache struct {
	mu      sync.Mutex
	entries map[types.UID]podCacheEntry
}

type podCacheEntry struct {
	rec     weak.Pointer[engine.PodRecord]
	sandbox sandboxRef
	pod     *podsyncv1.Pod
	enc     *podEncoding
}

// podEncoding is a cached message's protobuf encoding, made by the first
// response that needs it (podCodec).
type podEncoding struct {
	once sync.Once
	b    []byte
}

// sandboxRef is the sandbox recordToProto reports for a pod: the zero
// value when its worker has none.
type sandboxRef struct {
	id      string
	attempt uint32
}

func newPodCache() *podCache {
	return &podCache{entries: map[types.UID]podCacheEntry{}}
}

// get returns the message made of rec with sandbox sb, or nil.
func (c *podCache) get(rec *engine.PodRecord, sb sandboxRef) *podsyncv1.Pod {
	c.mu.Lock()
	e, ok := c.entries[rec.Pod.UID]
	c.mu.Unlock()
	if !ok || e.rec.Value() != rec || e.sandbox != sb {
		return nil
	}
	return e.pod
}

// add records pod as the message of rec with sandbox sb, replacing the
// pod's entry. Of two calls racing with different versions of a pod the
// last wins: a lookup with the other version misses and converts again.
func (c *podCache) add(rec *engine.PodRecord, sb sandboxRef, pod *podsyncv1.Pod) {
	uid, wp := rec.Pod.UID, weak.Make(rec)
	c.mu.Lock()
	c.entries[uid] = podCacheEntry{rec: wp, sandbox: sb, pod: pod, enc: &podEncoding{}}
	c.mu.Unlock()
	runtime.AddCleanup(rec, c.drop, recordRef{uid: uid, rec: wp})
}

// encoding returns the protobuf encoding of pod if pod is the message an
// entry holds, encoding it on the first call; nil for a message the cache
// does not hold (or one that fails to encode, which its caller's own
// marshalling then reports).
func (c *podCache) encoding(pod *podsyncv1.Pod) []byte {
	c.mu.Lock()
	e, ok := c.entries[types.UID(pod.GetMetadata().GetUid())]
	c.mu.Unlock()
	if !ok || e.pod != pod {
		return nil
	}
	e.enc.once.Do(func() {
		// Encoding only fills the message's size caches, as concurrent
		// marshalling of a shared message does (see podCache).
		if b, err := proto.Marshal(pod); err == nil {
			e.enc.b = b
		}
	})
	return e.enc.b
}

// recordRef names one record of a pod without keeping it alive.
type recordRef struct {
	uid types.UID
	rec weak.Pointer[engine.PodRecord]
}

// drop removes the entry of a record that is garbage, unless the entry is
// another record's by now.
func (c *podCache) drop(r recordRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[r.uid]; ok && e.rec == r.rec {
		delete(c.entries, r.uid)
	}
}

// len returns the number of entries.
func (c *podCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
