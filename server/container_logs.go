package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/errorinfo"
)

// Batching of GetContainerLogs: a message carries at most logBatchLines
// lines and, but for its last line, at most logBatchBytes of content, and
// a follower's lines wait at most logFlushInterval. A line is at most
// logs.MaxLineBytes plus one raw part of the runtime's (16 KiB by
// default), so a message stays below 2 MiB, well under gRPC's default
// 4 MiB receive limit. A caller that does not read holds up the reading
// of the file (Send blocks once gRPC's flow-control window is full): at
// most one batch is held in memory, whatever the file's size.
const (
	logBatchLines    = 64
	logBatchBytes    = 1 << 20
	logFlushInterval = 100 * time.Millisecond
)

// GetContainerLogs streams a container's output in batches of lines.
func (s *service) GetContainerLogs(req *podsyncv1.GetContainerLogsRequest, stream grpc.ServerStreamingServer[podsyncv1.GetContainerLogsResponse]) error {
	if err := InvalidRequest(s.validator.ValidateGetContainerLogsRequest(req)); err != nil {
		return err
	}
	ns, name := orDefaultNamespace(req.GetNamespace()), req.GetName()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if _, err := s.backend(ctx).Pods.GetShared(ctx, ns, name); err != nil {
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
	err := s.backend(ctx).Logs.ContainerLogs(ctx, lr, b.add)
	if ferr := b.flush(); err == nil {
		err = ferr
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errdefs.ErrNotFound):
		return WithReason(err, errorinfo.ReasonContainerNotFound, map[string]string{errorinfo.MetadataContainer: req.GetContainer()})
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
	bytes  int
	err    error
}

func (b *logBatcher) add(l engine.LogLine) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, logLineToProto(l))
	b.bytes += len(l.Content)
	if len(b.lines) >= logBatchLines || b.bytes >= logBatchBytes {
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
	b.lines, b.bytes = nil, 0
	return b.err
}
