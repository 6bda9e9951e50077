package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// LeaseEpochHeader is the request metadata key of the lease epoch a
// mutating call carries.
const LeaseEpochHeader = "podsync-lease-epoch"

// IfRevision is the precondition "the pod (or object) is at revision r":
// the revision GetPod, ListPods, WatchPods or SyncPod's result returned.
// A write under it fails with ErrConflict (ABORTED, REVISION_MISMATCH)
// when anything changed the pod since, and changes nothing.
func IfRevision(r int64) *podsyncv1.Precondition {
	return &podsyncv1.Precondition{Revision: &r}
}

// IfNotExists is the precondition "the pod does not exist": a create that
// never overwrites (ErrConflict if it exists).
func IfNotExists() *podsyncv1.Precondition {
	var zero int64
	return &podsyncv1.Precondition{Revision: &zero}
}

// IfUID is the precondition "the pod exists as incarnation uid"
// (ErrUIDMismatch otherwise).
func IfUID(uid string) *podsyncv1.Precondition {
	return &podsyncv1.Precondition{Uid: uid}
}

// CurrentRevision returns the current revision a failed precondition
// reported (ErrConflict, ErrUIDMismatch): 0 when the pod or object does
// not exist; ok is false when err carries none.
func CurrentRevision(err error) (rev int64, ok bool) {
	e := asError(err)
	if e == nil {
		return 0, false
	}
	s, ok := e.Metadata["revision"]
	if !ok {
		return 0, false
	}
	rev, perr := strconv.ParseInt(s, 10, 64)
	return rev, perr == nil
}

// ConflictRetries is how many times RetryOnConflict calls fn at most.
const ConflictRetries = 5

// RetryOnConflict calls fn, a read-modify-write with a revision
// precondition, until it returns an error other than ErrConflict (nil
// included), it has been called ConflictRetries times, or ctx ends,
// waiting 10 ms (±10 %) between calls: client-go's
// retry.RetryOnConflict(retry.DefaultRetry, fn). fn must read again on
// every call. It returns fn's last error.
func RetryOnConflict(ctx context.Context, fn func(ctx context.Context) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = fn(ctx)
		if err == nil || !errors.Is(err, ErrConflict) || attempt >= ConflictRetries {
			return err
		}
		d := time.Duration(float64(10*time.Millisecond) * (0.9 + 0.2*rand.Float64()))
		if !sleep(ctx, d) {
			return fmt.Errorf("%w; the last of %d attempts: %w", ctx.Err(), attempt, err)
		}
	}
}

// WithLeaseEpoch returns ctx whose calls carry the lease epoch epoch, for
// one call; UseLeaseEpoch sets it for every call of a Client.
func WithLeaseEpoch(ctx context.Context, epoch int64) context.Context {
	return metadata.AppendToOutgoingContext(ctx, LeaseEpochHeader, strconv.FormatInt(epoch, 10))
}

// UseLeaseEpoch makes every later call of c carry the lease epoch epoch
// (0: none), unless its context carries one (WithLeaseEpoch). podsyncd
// then refuses c's mutating calls with ErrLeaseSuperseded once another
// acquisition supersedes the epoch.
func (c *Client) UseLeaseEpoch(epoch int64) { c.epoch.Store(epoch) }

// outgoing returns ctx carrying c's lease epoch, if it has one and ctx
// carries none.
func (c *Client) outgoing(ctx context.Context) context.Context {
	e := c.epoch.Load()
	if e == 0 {
		return ctx
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(LeaseEpochHeader)) > 0 {
		return ctx
	}
	return WithLeaseEpoch(ctx, e)
}

// AcquireLease makes the caller (its identity: its client certificate, or
// its uid on the unix socket) the holder of the node's lease for ttl, with
// a new epoch. Errors: ErrLeaseHeld (Metadata "holder", "epoch",
// "expire_time") while another identity holds an unexpired lease. Not
// retried: a retry would take a new epoch; a caller that lost the answer
// acquires again.
func (c *Client) AcquireLease(ctx context.Context, ttl time.Duration) (*podsyncv1.Lease, error) {
	resp, err := c.api.AcquireLease(c.outgoing(ctx), &podsyncv1.AcquireLeaseRequest{Ttl: durationpb.New(ttl)})
	if err != nil {
		return nil, wrap("AcquireLease", "", err)
	}
	return resp.GetLease(), nil
}

// RenewLease extends the lease of epoch by ttl from now (its own ttl when
// 0). Errors: ErrLeaseSuperseded when epoch is no longer the current one.
// Retried on ErrUnavailable with WithRetry.
func (c *Client) RenewLease(ctx context.Context, epoch int64, ttl time.Duration) (*podsyncv1.Lease, error) {
	req := &podsyncv1.RenewLeaseRequest{Epoch: epoch}
	if ttl > 0 {
		req.Ttl = durationpb.New(ttl)
	}
	resp, err := unary(ctx, c, "RenewLease", "", c.api.RenewLease, req)
	return resp.GetLease(), err
}

// ReleaseLease gives up the lease of epoch; released is false when it was
// released already. Errors: ErrLeaseSuperseded. Retried on ErrUnavailable
// with WithRetry.
func (c *Client) ReleaseLease(ctx context.Context, epoch int64) (released bool, err error) {
	resp, err := unary(ctx, c, "ReleaseLease", "", c.api.ReleaseLease, &podsyncv1.ReleaseLeaseRequest{Epoch: epoch})
	return resp.GetReleased(), err
}

// KeepLease acquires the node's lease for ttl, makes every call of c
// carry its epoch (UseLeaseEpoch) and renews it every ttl/3 until ctx
// ends, then releases it (under a fresh 5 s deadline) and returns nil.
// acquired, if not nil, is called with each lease acquired.
//
// A lease held by another identity is waited for (acquisition retried
// every ttl/3). A renewal refused with ErrLeaseSuperseded means another
// control plane took the node: KeepLease stops carrying the epoch and
// returns that error, so that its caller stops driving the node. Other
// renewal errors (podsyncd unreachable) are retried until the lease would
// have expired; then the lease is acquired again.
func (c *Client) KeepLease(ctx context.Context, ttl time.Duration, acquired func(*podsyncv1.Lease)) error {
	period := max(ttl/3, 100*time.Millisecond)
	var lease *podsyncv1.Lease
	defer func() {
		if lease == nil {
			return
		}
		c.UseLeaseEpoch(0)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = c.ReleaseLease(rctx, lease.GetEpoch())
	}()
	var renewed time.Time
	for {
		var err error
		switch {
		case lease == nil || time.Since(renewed) >= ttl:
			lease, err = c.AcquireLease(ctx, ttl)
			if err == nil {
				renewed = time.Now()
				c.UseLeaseEpoch(lease.GetEpoch())
				if acquired != nil {
					acquired(lease)
				}
			}
		default:
			var l *podsyncv1.Lease
			l, err = c.RenewLease(ctx, lease.GetEpoch(), ttl)
			switch {
			case err == nil:
				lease, renewed = l, time.Now()
			case errors.Is(err, ErrLeaseSuperseded):
				c.UseLeaseEpoch(0)
				lease = nil
				return err
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if !sleep(ctx, period) {
			return nil
		}
	}
}
