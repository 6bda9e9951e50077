package server

import (
	"k8s.io/utils/lru"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/store"
)

// podCacheSize bounds the pods podCache holds: nine times podsyncd's
// default --max-pods (110), room for the terminal pods a node keeps stored
// too. A ListPods of more pods than this evicts the entries it needs next
// and converts every pod, as it would without the cache.
const podCacheSize = 1024

// podCache holds the API message recordToProto made of each stored pod,
// so that GetPod and ListPods convert a pod only when it changed: that
// conversion was a third of ListPods' CPU time.
//
// An entry is keyed by the pod's UID and serves only the record it was
// made of, compared by pointer, and the same sandbox. The store hands out
// one shared record per version of a pod's bytes (Node.ListShared and
// Node.GetShared), and any write — a status, a spec, a deletion mark —
// makes a new record, so a pointer names a version. The entry holds its
// record, so that record's address cannot be reused for another one while
// the entry exists. The sandbox, the worker's and not the record's, can
// change without a write.
//
// The messages are shared by every response that returns them, marshalled
// concurrently: nothing may change a message once it is in the cache.
// Handlers only put them in responses, and no interceptor changes
// responses (grpc.go). Marshalling only fills the messages' size caches,
// atomically and with the same sizes whichever call fills them. The LRU
// bound drops the entries of pods deleted long ago, and of versions no
// reader asks for any more.
type podCache struct {
	entries *lru.Cache // types.UID -> *podCacheEntry; locks itself
}

type podCacheEntry struct {
	rec     *store.PodRecord
	sandbox sandboxRef
	pod     *podsyncv1.Pod
}

// sandboxRef is the sandbox recordToProto reports for a pod: the zero
// value when its worker has none.
type sandboxRef struct {
	id      string
	attempt uint32
}

func newPodCache(size int) *podCache {
	return &podCache{entries: lru.New(size)}
}

// get returns the message made of rec with sandbox sb, or nil.
func (c *podCache) get(rec *store.PodRecord, sb sandboxRef) *podsyncv1.Pod {
	v, ok := c.entries.Get(rec.Pod.UID)
	if !ok {
		return nil
	}
	e, ok := v.(*podCacheEntry)
	if !ok || e.rec != rec || e.sandbox != sb {
		return nil
	}
	return e.pod
}

// add records pod as the message of rec with sandbox sb, replacing the
// pod's entry. Of two calls racing with different versions of a pod the
// last wins: a lookup with the other version misses and converts again.
func (c *podCache) add(rec *store.PodRecord, sb sandboxRef, pod *podsyncv1.Pod) {
	c.entries.Add(rec.Pod.UID, &podCacheEntry{rec: rec, sandbox: sb, pod: pod})
}
