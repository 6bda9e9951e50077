package server

import (
	"context"
	"errors"
	"io"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/errorinfo"
)

// PortForward forwards one connection to a pod's port.
func (s *service) PortForward(stream grpc.BidiStreamingServer[podsyncv1.PortForwardRequest, podsyncv1.PortForwardResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if err := InvalidRequest(s.validator.ValidatePortForwardStart(start)); err != nil {
		return err
	}
	ns, name := orDefaultNamespace(start.GetNamespace()), start.GetName()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	sl := s.startSession(ctx, sessionPortForward, engine.ContainerRef{Namespace: ns, Name: name}, nil, false, false)
	sl.log = sl.log.With(zapPort(start.GetPort()))

	// The caller's data goes through a pipe: a frame waits until the pod
	// connection takes it.
	pr, pw := io.Pipe()
	defer pr.CloseWithError(io.ErrClosedPipe)
	go func() {
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				_ = pw.Close() // the caller half-closed
				return
			}
			if err != nil {
				_ = pw.CloseWithError(err)
				cancel()
				return
			}
			if m.GetStart() != nil {
				_ = pw.CloseWithError(InvalidRequest(s.validator.ValidatePortForwardStart(nil)))
				cancel()
				return
			}
			if d := m.GetData(); len(d) > 0 {
				if _, err := pw.Write(d); err != nil {
					return
				}
				sl.in.Add(int64(len(d)))
			}
		}
	}()
	out := &dataWriter{send: func(p []byte) error {
		return stream.Send(&podsyncv1.PortForwardResponse{Data: p})
	}, count: &sl.out}
	err = s.backend(ctx).Sessions.PortForward(ctx, ns, name, int32(start.GetPort()), pr, out, s.idleTimeout)
	sl.end(0, err)
	if errors.Is(err, errdefs.ErrNotRunning) {
		return WithReason(err, errorinfo.ReasonPodNotRunning, nil)
	}
	return err
}

// dataWriter sends what it is given as data frames.
type dataWriter struct {
	send  func([]byte) error
	count *counter
}

func (w *dataWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxFrameBytes)]
		if err := w.send(chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		w.count.Add(int64(len(chunk)))
		p = p[len(chunk):]
	}
	return n, nil
}

func zapPort(port uint32) zap.Field { return zap.Uint32("port", port) }
