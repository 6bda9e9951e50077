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

// counted reports whether a call counts against its identity's
// MaxStreamsPerIdentity while it runs: every stream, of every service
// (watches of pods, objects and health, followed logs, sessions, RunPods
// and SyncPod, reflection), which lasts as long as its caller or its work
// wants, and the unary calls that hold the node's work for as long as
// their caller asks (ExecSync runs a command up to its timeout). One
// budget per identity bounds them all: a new kind of stream is counted
// without being listed.
func counted(fullMethod string, stream bool) bool {
	return stream || fullMethod == podsyncv1.PodSyncService_ExecSync_FullMethodName
}

// streamLimits counts each identity's open streams and running commands
// (counted).
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
			fmt.Sprintf("%s holds %d streams and commands open (watches, logs, sessions, ExecSync), the most one identity may; close one and retry", identity, l.max),
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
