package server

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
)

// Defaults of RateLimit.
const (
	DefaultRateLimitPerSecond = 20
	DefaultRateLimitBurst     = 40
)

// Defaults of ReadRateLimit: a control plane listing and getting its pods
// every second, podsyncctl, and `logs -f` reconnecting stay far below
// them; a loop of PlanPod (each call lists the runtime's sandboxes and
// containers) is held to DefaultReadRateLimitPerSecond /
// DefaultPlanPodCost calls a second.
const (
	DefaultReadRateLimitPerSecond = 100
	DefaultReadRateLimitBurst     = 200
	DefaultPlanPodCost            = 10
)

// maxLimiters bounds the identities whose buckets are remembered; beyond
// it, full (idle) buckets are forgotten.
const maxLimiters = 4096

// RateLimit bounds the mutating calls (those RoleRead may not call:
// RunPods, SyncPod, DeletePod, and the opening of ExecSync, Exec, Attach
// and PortForward sessions) of each identity with a token bucket, and
// its read calls with another (Read). Health and reflection are not
// limited.
type RateLimit struct {
	// PerSecond is the sustained rate of mutating calls per identity. Zero
	// means DefaultRateLimitPerSecond; negative disables the limit.
	PerSecond float64 `json:"perSecond,omitempty"`
	// Burst is the number of calls an identity may make at once. Zero
	// means DefaultRateLimitBurst.
	Burst int `json:"burst,omitempty"`
	// Read bounds the read calls of each identity.
	Read ReadRateLimit `json:"read,omitzero"`
}

// ReadRateLimit bounds the read calls of each identity, in a bucket of
// their own: ListPods, GetPod and PlanPod, and the opening of WatchPods
// and GetContainerLogs streams (what a stream sends afterwards is not
// counted; MaxStreamsPerIdentity bounds how many stay open). Each call
// takes one token, PlanPod PlanPodCost.
type ReadRateLimit struct {
	// PerSecond is the sustained rate of tokens per identity. Zero means
	// DefaultReadRateLimitPerSecond; negative disables the limit.
	PerSecond float64 `json:"perSecond,omitempty"`
	// Burst is the bucket's size. Zero means DefaultReadRateLimitBurst.
	Burst int `json:"burst,omitempty"`
	// PlanPodCost is the tokens a PlanPod takes: it lists the runtime's
	// sandboxes and containers. Zero means DefaultPlanPodCost; it is at
	// most Burst.
	PlanPodCost int `json:"planPodCost,omitempty"`
}

func (r ReadRateLimit) withDefaults() ReadRateLimit {
	if r.PerSecond == 0 {
		r.PerSecond = DefaultReadRateLimitPerSecond
	}
	if r.Burst <= 0 {
		r.Burst = DefaultReadRateLimitBurst
	}
	if r.PlanPodCost <= 0 {
		r.PlanPodCost = DefaultPlanPodCost
	}
	r.PlanPodCost = min(r.PlanPodCost, r.Burst)
	return r
}

// readCost is the tokens a read call takes from the read bucket: every
// PodSyncService read method takes one (a method added later too), PlanPod
// PlanPodCost; health and reflection take none.
func (r ReadRateLimit) readCost(fullMethod string) int {
	switch {
	case fullMethod == podsyncv1.PodSyncService_PlanPod_FullMethodName:
		return r.PlanPodCost
	case strings.HasPrefix(fullMethod, "/"+podsyncv1.PodSyncService_ServiceDesc.ServiceName+"/"):
		return 1
	}
	return 0
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
	kind  string // "mutating" or "read", for the message
	limit rate.Limit
	burst int
	now   func() time.Time

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// newLimiters returns the buckets of mutating calls, nil when the limit
// is disabled.
func newLimiters(r RateLimit) *limiters {
	r = r.withDefaults()
	return newBuckets("mutating", r.PerSecond, r.Burst)
}

// newReadLimiters returns the buckets of read calls, nil when the limit
// is disabled.
func newReadLimiters(r ReadRateLimit) *limiters {
	r = r.withDefaults()
	return newBuckets("read", r.PerSecond, r.Burst)
}

func newBuckets(kind string, perSecond float64, burst int) *limiters {
	if perSecond < 0 {
		return nil
	}
	return &limiters{kind: kind, limit: rate.Limit(perSecond), burst: burst, now: time.Now, m: map[string]*rate.Limiter{}}
}

// allow takes a token of key's bucket, or returns the RATE_LIMITED error.
func (l *limiters) allow(key string) error { return l.allowN(key, 1) }

// allowN takes n tokens of key's bucket (n at most the burst), or returns
// the RATE_LIMITED error.
func (l *limiters) allowN(key string, n int) error {
	if l == nil || n <= 0 {
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

	r := lim.ReserveN(now, n)
	delay := r.DelayFrom(now)
	if delay == 0 {
		return nil
	}
	// Refused calls take no token, so a client that keeps retrying is
	// not starved for longer than its rate says.
	r.CancelAt(now)
	return NewError(codes.ResourceExhausted, errorinfo.ReasonRateLimited,
		fmt.Sprintf("rate limit of %g %s calls per second (burst %d) exceeded for %s; retry in %s",
			float64(l.limit), l.kind, l.burst, key, delay.Round(time.Millisecond)),
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
