package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/failpoint"
)

// keyLease is the meta key of the node's lease (JSON).
var keyLease = []byte("lease")

// Lease is the node's lease: who drives the node and under which fencing
// epoch. It is stored with the pods, so its epoch survives restarts and
// is checked in the transaction of every fenced write.
type Lease struct {
	// Holder is the identity that acquired the lease; empty when it was
	// released or never acquired.
	Holder string `json:"holder,omitempty"`
	// Epoch grows by one with each acquisition and never decreases; 0
	// when the lease was never acquired.
	Epoch int64 `json:"epoch"`
	// TTL is how long the lease lasts from RenewedAt.
	TTL time.Duration `json:"ttl,omitempty"`
	// AcquiredAt is when Holder acquired it, RenewedAt when it last
	// acquired or renewed it.
	AcquiredAt time.Time `json:"acquiredAt,omitzero"`
	RenewedAt  time.Time `json:"renewedAt,omitzero"`
}

// Held reports whether somebody holds the lease (expired or not).
func (l Lease) Held() bool { return l.Holder != "" }

// Expires is when the lease expires: RenewedAt plus TTL.
func (l Lease) Expires() time.Time { return l.RenewedAt.Add(l.TTL) }

// Expired reports whether the lease is held and expired at now, or not
// held at all: whether another identity may acquire it.
func (l Lease) Expired(now time.Time) bool { return !l.Held() || !now.Before(l.Expires()) }

// Fence is the lease condition of a write: the epoch the caller carries
// and whether the node requires one. The zero Fence (no epoch, not
// required) lets every write through; a nil *Fence is a write of the
// node's own (a status, a pass, the manifest directory), never fenced.
type Fence struct {
	// Epoch is the lease epoch the write carries, 0 for none.
	Epoch int64
	// Require refuses a write that does not carry the current epoch of a
	// held lease (podsyncd --require-lease).
	Require bool
}

// Precondition is what a pod's write requires of the pod it changes; the
// zero value requires nothing.
type Precondition struct {
	// Revision, if not nil, is the revision (ModRevision) the pod must be
	// at; 0 means that it must not exist.
	Revision *int64
	// UID, if not empty, is the uid the pod must exist as.
	UID types.UID
}

// With returns the conditions of p under the lease condition f.
func (p Precondition) With(f *Fence) Conditions {
	return Conditions{Revision: p.Revision, UID: p.UID, Fence: f}
}

// Conditions are the preconditions of a pod's write, checked in its
// transaction; the zero value checks nothing.
type Conditions struct {
	// Revision, if not nil, is the revision (ModRevision) the pod must be
	// at; 0 means that it must not exist.
	Revision *int64
	// UID, if not empty, is the uid the pod must exist as.
	UID types.UID
	// Fence, if not nil, is the write's lease condition.
	Fence *Fence
}

// Lease returns the node's lease; the zero Lease when it was never
// acquired.
func (s *Store) Lease() (Lease, error) {
	var l Lease
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		l, err = readLease(tx)
		return err
	})
	return l, err
}

// AcquireLease makes holder the lease's holder for ttl with the next
// epoch: when the lease is not held, expired, or held by holder already
// (a takeover by the same identity still fences the epoch before). It
// returns a *errdefs.LeaseError of ErrLeaseHeld while another identity
// holds an unexpired lease.
func (s *Store) AcquireLease(holder string, ttl time.Duration) (Lease, error) {
	if holder == "" || ttl <= 0 {
		return Lease{}, fmt.Errorf("acquire lease: %w: a holder and a positive ttl are required", errdefs.ErrInvalidRecord)
	}
	var out Lease
	err := s.update(func(tx *bolt.Tx, st *txState) error {
		l, err := readLease(tx)
		if err != nil {
			return err
		}
		if l.Holder != holder && !l.Expired(st.now) {
			return &errdefs.LeaseError{Class: errdefs.ErrLeaseHeld, Current: l.Epoch, Holder: l.Holder, Expires: l.Expires()}
		}
		out = Lease{Holder: holder, Epoch: l.Epoch + 1, TTL: ttl, AcquiredAt: st.now, RenewedAt: st.now}
		return writeLease(tx, out)
	})
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lease: %w", err)
	}
	return out, nil
}

// RenewLease extends holder's lease of epoch by ttl from now (the lease's
// own ttl when ttl is 0). An expired lease nobody acquired since may be
// renewed. It returns a *errdefs.LeaseError of ErrLeaseSuperseded when
// epoch is not the current epoch of a lease holder holds.
func (s *Store) RenewLease(holder string, epoch int64, ttl time.Duration) (Lease, error) {
	var out Lease
	err := s.update(func(tx *bolt.Tx, st *txState) error {
		l, err := readLease(tx)
		if err != nil {
			return err
		}
		if l.Epoch != epoch || l.Holder != holder {
			return &errdefs.LeaseError{Class: errdefs.ErrLeaseSuperseded, Epoch: epoch, Current: l.Epoch, Holder: l.Holder, Expires: l.Expires()}
		}
		if ttl > 0 {
			l.TTL = ttl
		}
		l.RenewedAt = st.now
		out = l
		return writeLease(tx, l)
	})
	if err != nil {
		return Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	return out, nil
}

// ReleaseLease gives up holder's lease of epoch; released is false when
// it was released already. The epoch stays: the next acquisition gets a
// greater one. It returns a *errdefs.LeaseError of ErrLeaseSuperseded when
// epoch is not the current one, or another identity holds it.
func (s *Store) ReleaseLease(holder string, epoch int64) (released bool, err error) {
	err = s.update(func(tx *bolt.Tx, _ *txState) error {
		l, err := readLease(tx)
		if err != nil {
			return err
		}
		switch {
		case l.Epoch == epoch && !l.Held():
			return nil
		case l.Epoch != epoch || l.Holder != holder:
			return &errdefs.LeaseError{Class: errdefs.ErrLeaseSuperseded, Epoch: epoch, Current: l.Epoch, Holder: l.Holder, Expires: l.Expires()}
		}
		released = true
		return writeLease(tx, Lease{Epoch: l.Epoch})
	})
	if err != nil {
		return false, fmt.Errorf("release lease: %w", err)
	}
	return released, nil
}

// Fenced runs fn in a write transaction once f holds, so that fn's effect
// (a change outside the store, such as a named volume's directory) is
// ordered with the lease's changes: a lease acquired after f's check
// waits for fn to return. fn must be short; it may not use the store.
func (s *Store) Fenced(f *Fence, fn func() error) error {
	return s.update(func(tx *bolt.Tx, _ *txState) error {
		if err := checkFence(tx, f); err != nil {
			return err
		}
		return fn()
	})
}

// checkFence returns the *errdefs.LeaseError refusing a write under f, or
// nil when f is nil or holds.
func checkFence(tx *bolt.Tx, f *Fence) error {
	if f == nil || (f.Epoch == 0 && !f.Require) {
		return nil
	}
	l, err := readLease(tx)
	if err != nil {
		return err
	}
	refuse := func(class error) error {
		return &errdefs.LeaseError{Class: class, Epoch: f.Epoch, Current: l.Epoch, Holder: l.Holder, Expires: l.Expires()}
	}
	switch {
	case f.Epoch != 0 && f.Epoch < l.Epoch:
		return refuse(errdefs.ErrLeaseSuperseded)
	case f.Epoch > l.Epoch:
		// An epoch never granted is no lease's: refused as missing.
		return refuse(errdefs.ErrLeaseRequired)
	case f.Require && (f.Epoch == 0 || !l.Held()):
		return refuse(errdefs.ErrLeaseRequired)
	}
	return nil
}

// checkPod returns the *errdefs.PreconditionError of a pod's write under c
// when the pod stored (nil when none) does not meet c, or c.Fence's
// refusal.
func checkPod(tx *bolt.Tx, c Conditions, what string, stored *PodRecord) error {
	if err := checkFence(tx, c.Fence); err != nil {
		return err
	}
	if failpoint.Skip(failpoint.SkipPreconditions) {
		return nil
	}
	var rev int64
	var uid types.UID
	if stored != nil {
		rev, uid = stored.ModRevision, stored.Pod.UID
	}
	fail := func(kind errdefs.PreconditionKind, want string) error {
		return &errdefs.PreconditionError{Kind: kind, What: what, Revision: rev, UID: string(uid), Want: want}
	}
	if c.UID != "" && c.UID != uid {
		return fail(errdefs.UIDMismatch, "uid "+string(c.UID))
	}
	if c.Revision != nil && *c.Revision != rev {
		if *c.Revision == 0 {
			return fail(errdefs.RevisionMismatch, "absent")
		}
		return fail(errdefs.RevisionMismatch, "at revision "+strconv.FormatInt(*c.Revision, 10))
	}
	return nil
}

func readLease(tx *bolt.Tx) (Lease, error) {
	var l Lease
	data := tx.Bucket(bucketMeta).Get(keyLease)
	if data == nil {
		return l, nil
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return Lease{}, fmt.Errorf("read lease: %w: %w", errdefs.ErrStoreCorrupt, err)
	}
	return l, nil
}

func writeLease(tx *bolt.Tx, l Lease) error {
	data, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("write lease: %w", err)
	}
	return tx.Bucket(bucketMeta).Put(keyLease, data)
}

// CheckPod checks the conditions c against the pod stored under
// namespace/name now, without writing: a write's early check, which its
// transaction repeats.
func (s *Store) CheckPod(namespace, name string, c Conditions) error {
	return s.view(func(tx *bolt.Tx) error {
		stored, err := podByName(tx, namespace, name)
		if err != nil {
			return err
		}
		return checkPod(tx, c, "pod "+namespace+"/"+name, stored)
	})
}

// Leases return the store's lease API for callers with a context (the
// node's facade, the server).
func (s *Store) Leases() *Leases { return &Leases{store: s} }

// Leases acquire, renew, release and read the node's lease.
type Leases struct {
	store *Store
}

// Get returns the node's lease (the zero Lease if never acquired).
func (l *Leases) Get(context.Context) (Lease, error) {
	ls, err := l.store.Lease()
	if err != nil {
		return Lease{}, fmt.Errorf("read lease: %w", err)
	}
	return ls, nil
}

// Acquire is AcquireLease.
func (l *Leases) Acquire(_ context.Context, holder string, ttl time.Duration) (Lease, error) {
	return l.store.AcquireLease(holder, ttl)
}

// Renew is RenewLease.
func (l *Leases) Renew(_ context.Context, holder string, epoch int64, ttl time.Duration) (Lease, error) {
	return l.store.RenewLease(holder, epoch, ttl)
}

// Release is ReleaseLease.
func (l *Leases) Release(_ context.Context, holder string, epoch int64) (bool, error) {
	return l.store.ReleaseLease(holder, epoch)
}

// Check returns the refusal of a write under f now (nil when f is nil or
// holds), without writing: the early check of a call whose writes are
// fenced again in their transactions (RunPods).
func (l *Leases) Check(f *Fence) error {
	return l.store.Fenced(f, func() error { return nil })
}

type fenceKey struct{}

// WithFence returns ctx carrying the lease condition of the writes made
// under it. Writes under a context without one are the node's own (its
// passes, the manifest directory) and are never fenced.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceOf returns the fence of ctx, or nil.
func FenceOf(ctx context.Context) *Fence {
	if f, ok := ctx.Value(fenceKey{}).(Fence); ok {
		return &f
	}
	return nil
}
