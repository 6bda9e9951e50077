package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// backoff is an exponential back-off with jitter: base, 2×base, 4×base, …
// up to maxBackoff (or base, if that is larger), each ±20 %.
type backoff struct {
	base time.Duration
	n    int
}

// next returns the next delay.
func (b *backoff) next() time.Duration {
	d := b.base
	for i := 0; i < b.n && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, max(maxBackoff, b.base))
	b.n++
	// Jitter spreads the retries of many clients after a podsyncd restart.
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// reset starts again from base.
func (b *backoff) reset() { b.n = 0 }

// sleep waits d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retryable reports whether a call that failed with err may be repeated:
// UNAVAILABLE means podsyncd, or its runtime, did not act on it.
func retryable(err error) bool {
	return status.Code(err) == codes.Unavailable
}

// retry runs call until it succeeds, fails with an error other than
// UNAVAILABLE, or the retries of WithRetry are spent. When ctx ends
// during a back-off it returns ctx's error, with the last error of call.
func (c *Client) retry(ctx context.Context, call func(context.Context) error) error {
	bo := backoff{base: c.opts.retryBackoff}
	for attempt := 1; ; attempt++ {
		err := call(ctx)
		if err == nil || attempt > c.opts.retryMax || !retryable(err) || ctx.Err() != nil {
			return err
		}
		if !sleep(ctx, bo.next()) {
			return fmt.Errorf("%w; the last of %d attempts: %w", ctx.Err(), attempt, err)
		}
	}
}

// unary makes the unary call method(req) under retry and returns the
// response of the attempt that succeeded, or the last error wrapped as op
// on name (a pod's or object's namespace/name, or empty).
func unary[Req, Resp any](ctx context.Context, c *Client, op, name string, method func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	ctx = c.outgoing(ctx)
	var resp Resp
	err := c.retry(ctx, func(ctx context.Context) (err error) {
		resp, err = method(ctx, req)
		return err
	})
	if err != nil {
		var none Resp
		return none, wrap(op, name, err)
	}
	return resp, nil
}

// openStream opens a server stream and receives its first message,
// retrying (when retry is true) while that fails with UNAVAILABLE: until
// a message has arrived, nothing was delivered to the caller. It returns
// the stream and the first message, or io.EOF for a stream that ended
// without one, or the error. The stream lives as long as ctx.
func openStream[T any](ctx context.Context, c *Client, retry bool, open func(context.Context) (grpc.ServerStreamingClient[T], error)) (grpc.ServerStreamingClient[T], *T, error) {
	ctx = c.outgoing(ctx)
	var (
		stream grpc.ServerStreamingClient[T]
		first  *T
	)
	call := func(ctx context.Context) error {
		s, err := open(ctx)
		if err != nil {
			return err
		}
		m, err := s.Recv()
		if err != nil {
			return err
		}
		stream, first = s, m
		return nil
	}
	var err error
	if retry {
		err = c.retry(ctx, call)
	} else {
		err = call(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	return stream, first, nil
}

// isEOF reports whether a stream ended cleanly.
func isEOF(err error) bool { return errors.Is(err, io.EOF) }
