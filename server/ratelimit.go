package server

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"

	"github.com/podsync/podsync/errorinfo"
)

// Defaults of RateLimit.
const (
	DefaultRateLimitPerSecond = 20
	DefaultRateLimitBurst     = 40
)

// maxLimiters bounds the identities whose buckets are remembered; beyond
// it, full (idle) buckets are forgotten.
const maxLimiters = 4096

// RateLimit bounds the mutating calls (those only RoleAdmin may call:
// RunPods, SyncPod, DeletePod) of each identity with a token bucket. Read
// calls are not limited.
type RateLimit struct {
	// PerSecond is the sustained rate of mutating calls per identity. Zero
	// means DefaultRateLimitPerSecond; negative disables the limit.
	PerSecond float64 `json:"perSecond,omitempty"`
	// Burst is the number of calls an identity may make at once. Zero
	// means DefaultRateLimitBurst.
	Burst int `json:"burst,omitempty"`
}

func (r RateLimit) withDefaults() RateLimit {
	if r.PerSecond == 0 {
		r.PerSecond = DefaultRateLimitPerSecond
	}
	if r.Burst <= 0 {
		r.Burst = DefaultRateLimitBurst
	}
	return r
}

// limiters are the token buckets of the identities.
type limiters struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// newLimiters returns nil when the limit is disabled.
func newLimiters(r RateLimit) *limiters {
	r = r.withDefaults()
	if r.PerSecond < 0 {
		return nil
	}
	return &limiters{limit: rate.Limit(r.PerSecond), burst: r.Burst, now: time.Now, m: map[string]*rate.Limiter{}}
}

// allow takes a token of key's bucket, or returns the RATE_LIMITED error.
func (l *limiters) allow(key string) error {
	if l == nil {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	lim, ok := l.m[key]
	if !ok {
		if len(l.m) >= maxLimiters {
			l.forgetIdleLocked(now)
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.m[key] = lim
	}
	l.mu.Unlock()

	r := lim.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if delay == 0 {
		return nil
	}
	// Refused calls take no token, so a client that keeps retrying is
	// not starved for longer than its rate says.
	r.CancelAt(now)
	return NewError(codes.ResourceExhausted, errorinfo.ReasonRateLimited,
		fmt.Sprintf("rate limit of %g mutating calls per second (burst %d) exceeded for %s; retry in %s",
			float64(l.limit), l.burst, key, delay.Round(time.Millisecond)),
		map[string]string{
			errorinfo.MetadataIdentity:         key,
			errorinfo.MetadataRetryAfterMillis: strconv.FormatInt(delay.Milliseconds()+1, 10),
		})
}

// forgetIdleLocked drops the buckets that are full again: forgetting them
// changes nothing for their identities.
func (l *limiters) forgetIdleLocked(now time.Time) {
	for k, lim := range l.m {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.m, k)
		}
	}
}
