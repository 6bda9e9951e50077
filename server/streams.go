package server

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
)

// DefaultMaxStreamsPerIdentity is Options.MaxStreamsPerIdentity's
// default: enough for a controller and its operators, and a few MiB of
// watch buffers at most for one identity.
const DefaultMaxStreamsPerIdentity = 64

// DefaultMaxConcurrentStreams bounds the calls in flight on one
// connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS).
const DefaultMaxConcurrentStreams = 256

// longLived reports whether fullMethod is a stream that lasts as long as
// its caller wants (a watch, a followed log): those are counted against
// their identity's MaxStreamsPerIdentity.
func longLived(fullMethod string) bool {
	switch fullMethod {
	case podsyncv1.PodSyncService_WatchPods_FullMethodName, podsyncv1.PodSyncService_GetContainerLogs_FullMethodName,
		podsyncv1.PodSyncService_Exec_FullMethodName, podsyncv1.PodSyncService_Attach_FullMethodName,
		podsyncv1.PodSyncService_PortForward_FullMethodName:
		return true
	}
	return false
}

// streamLimits counts each identity's open long-lived streams.
type streamLimits struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

func newStreamLimits(max int) *streamLimits {
	if max <= 0 {
		max = DefaultMaxStreamsPerIdentity
	}
	return &streamLimits{max: max, open: map[string]int{}}
}

// acquire counts one more stream of identity, or returns the
// TOO_MANY_STREAMS error if it holds max already; release, called once,
// uncounts it.
func (l *streamLimits) acquire(identity string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[identity] >= l.max {
		return nil, NewError(codes.ResourceExhausted, errorinfo.ReasonTooManyStreams,
			fmt.Sprintf("%s holds %d watch, log and session streams open, the most one identity may; close one and retry", identity, l.max),
			map[string]string{errorinfo.MetadataIdentity: identity})
	}
	l.open[identity]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.open[identity]--; l.open[identity] == 0 {
			delete(l.open, identity)
		}
	}, nil
}
