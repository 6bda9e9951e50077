package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/logs"
)

// Batching of GetContainerLogs: a message carries at most logBatchLines
// lines, and a follower's lines wait at most logFlushInterval.
const (
	logBatchLines    = 64
	logFlushInterval = 100 * time.Millisecond
)

// GetContainerLogs streams a container's output in batches of lines.
func (s *service) GetContainerLogs(req *podsyncv1.GetContainerLogsRequest, stream grpc.ServerStreamingServer[podsyncv1.GetContainerLogsResponse]) error {
	if err := s.ready(); err != nil {
		return err
	}
	if err := InvalidRequest(s.validator.ValidateGetContainerLogsRequest(req)); err != nil {
		return err
	}
	ns, name := orDefaultNamespace(req.GetNamespace()), req.GetName()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if _, err := s.node.Get(ctx, ns, name); err != nil {
		return err // POD_NOT_FOUND
	}
	lr := engine.LogsRequest{Namespace: ns, Name: name, Container: req.GetContainer(), Previous: req.GetPrevious()}
	lr.TailLines = req.TailLines
	lr.LimitBytes = req.LimitBytes
	lr.Follow = req.GetFollow()
	if t := req.GetSinceTime(); t != nil {
		lr.SinceTime = t.AsTime()
	}

	b := &logBatcher{stream: stream}
	if lr.Follow {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(logFlushInterval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if b.flush() != nil {
						cancel()
						return
					}
				}
			}
		}()
		defer wg.Wait()
		defer cancel()
	}
	err := s.node.ContainerLogs(ctx, lr, b.add)
	if ferr := b.flush(); err == nil {
		err = ferr
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrNotFound):
		return WithReason(err, ReasonContainerNotFound, map[string]string{"container": req.GetContainer()})
	case stream.Context().Err() != nil:
		return nil // the client went away
	}
	return err
}

// logBatcher collects lines and sends them in messages.
type logBatcher struct {
	stream grpc.ServerStreamingServer[podsyncv1.GetContainerLogsResponse]
	mu     sync.Mutex
	lines  []*podsyncv1.LogLine
	err    error
}

func (b *logBatcher) add(l logs.Line) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, logLineToProto(l))
	if len(b.lines) >= logBatchLines {
		return b.flushLocked()
	}
	return b.err
}

func (b *logBatcher) flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *logBatcher) flushLocked() error {
	if b.err != nil || len(b.lines) == 0 {
		return b.err
	}
	b.err = b.stream.Send(&podsyncv1.GetContainerLogsResponse{Lines: b.lines})
	b.lines = nil
	return b.err
}
