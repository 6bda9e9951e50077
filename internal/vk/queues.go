package vk

import (
	"time"

	"k8s.io/client-go/util/workqueue"
)

// retryLimiter is the rate limiter of the node library's queues (pods to
// create, update and delete; statuses to write): a pod's work goes at once
// when it is first queued since it last succeeded, as the kubelet's pod
// workers and status manager act at once, and its retries back off from
// 10 ms to 1000 s.
//
// The library's default (client-go's controller limiter) delays every
// item 5 ms, twice in a pod's path (to the provider, and its status
// back), and its bucket lets each queue of a node take 10 new items a
// second after a burst of 100, a limit the kubelet does not have. The
// API server is protected by the client's own limit (--kube-api-qps, as
// the kubelet's).
type retryLimiter struct {
	workqueue.TypedRateLimiter[any] // per item, exponential
}

func newRetryLimiter() retryLimiter {
	return retryLimiter{workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, 1000*time.Second)}
}

// When is how long item waits before it is worked on: nothing the first
// time since it was last forgotten (it succeeded), then 10 ms, 20 ms, …
func (l retryLimiter) When(item any) time.Duration {
	first := l.NumRequeues(item) == 0
	d := l.TypedRateLimiter.When(item) // counted either way
	if first {
		return 0
	}
	return d
}
