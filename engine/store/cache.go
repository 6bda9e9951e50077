package store

import (
	"hash/maphash"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// recordCache holds the redacted record decoded from each pod's stored
// bytes, keyed by uid and checked against a hash of the bytes, so a record
// changed by any write (or a pod deleted and stored again) is decoded
// afresh. Callers get deep copies: they may change what they are given.
type recordCache struct {
	seed    maphash.Seed
	mu      sync.Mutex
	entries map[string]cachedRecord
}

func newRecordCache() *recordCache {
	return &recordCache{seed: maphash.MakeSeed(), entries: map[string]cachedRecord{}}
}

type cachedRecord struct {
	sum  uint64
	size int
	rec  *PodRecord
}

// redacted returns a copy of the redacted record stored as data under
// uid, decoding data only when it is not the bytes last seen for uid.
func (c *recordCache) redacted(uid, data []byte) (*PodRecord, error) {
	return c.get(uid, data, true)
}

// shared is redacted without the copy: the record is shared with the
// cache and later callers, and must not be changed.
func (c *recordCache) shared(uid, data []byte) (*PodRecord, error) {
	return c.get(uid, data, false)
}

func (c *recordCache) get(uid, data []byte, copied bool) (*PodRecord, error) {
	sum := maphash.Bytes(c.seed, data)
	c.mu.Lock()
	e, ok := c.entries[string(uid)]
	c.mu.Unlock()
	if ok && e.sum == sum && e.size == len(data) {
		if !copied {
			return e.rec, nil
		}
		return e.rec.deepCopy(), nil
	}
	rec, err := decodeRedacted(data)
	if err != nil {
		return nil, err
	}
	cached := rec
	if copied {
		cached = rec.deepCopy()
	}
	c.mu.Lock()
	c.entries[string(uid)] = cachedRecord{sum: sum, size: len(data), rec: cached}
	c.mu.Unlock()
	return rec, nil
}

// forget drops uid's entry, for a deleted pod.
func (c *recordCache) forget(uid string) {
	c.mu.Lock()
	delete(c.entries, uid)
	c.mu.Unlock()
}

// deepCopy copies r, its pod and objects.
func (r *PodRecord) deepCopy() *PodRecord {
	out := *r
	out.Pod = r.Pod.DeepCopy()
	if r.ConfigMaps != nil {
		out.ConfigMaps = make([]*corev1.ConfigMap, len(r.ConfigMaps))
		for i, cm := range r.ConfigMaps {
			out.ConfigMaps[i] = cm.DeepCopy()
		}
	}
	if r.Secrets != nil {
		out.Secrets = make([]*corev1.Secret, len(r.Secrets))
		for i, s := range r.Secrets {
			out.Secrets[i] = s.DeepCopy()
		}
	}
	return &out
}
