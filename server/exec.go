package server

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/logx"
)

// maxFrameBytes bounds the bytes of one stdout, stderr or data message:
// with gRPC's flow control, what a session holds in memory is a few
// frames, whatever the process writes.
const maxFrameBytes = 32 << 10

// Session kinds, the "kind" of the session metrics and log lines.
const (
	sessionExec        = "exec"
	sessionAttach      = "attach"
	sessionPortForward = "port-forward"
	sessionExecSync    = "exec-sync"
)

// ExecSync runs a command and returns its output.
func (s *service) ExecSync(ctx context.Context, req *podsyncv1.ExecSyncRequest) (*podsyncv1.ExecSyncResponse, error) {
	if err := InvalidRequest(s.validator.ValidateExecSyncRequest(req)); err != nil {
		return nil, err
	}
	ref := engine.ContainerRef{Namespace: orDefaultNamespace(req.GetNamespace()), Name: req.GetName(), Container: req.GetContainer()}
	sl := s.startSession(ctx, sessionExecSync, ref, req.GetCommand(), false, false)
	res, err := s.backend(ctx).Sessions.ExecSync(ctx, ref, req.GetCommand(), req.GetTimeout().AsDuration())
	sl.out.Add(int64(len(res.Stdout) + len(res.Stderr)))
	sl.end(res.ExitCode, err)
	if err != nil {
		return nil, sessionError(err, ref.Container)
	}
	return &podsyncv1.ExecSyncResponse{
		Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: int32(res.ExitCode),
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated, TimedOut: res.TimedOut,
	}, nil
}

// Exec runs a command with the caller's streams.
func (s *service) Exec(stream grpc.BidiStreamingServer[podsyncv1.ExecRequest, podsyncv1.ExecResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if err := InvalidRequest(s.validator.ValidateExecStart(start)); err != nil {
		return err
	}
	ref := engine.ContainerRef{Namespace: orDefaultNamespace(start.GetNamespace()), Name: start.GetName(), Container: start.GetContainer()}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	sl := s.startSession(ctx, sessionExec, ref, start.GetCommand(), start.GetStdin(), start.GetTty())
	sio := newSessionIO(ctx, cancel, sl, start.GetStdin(), start.GetTty(), start.GetTerminalSize(), func(p []byte, stderr bool) error {
		if stderr {
			return stream.Send(&podsyncv1.ExecResponse{Msg: &podsyncv1.ExecResponse_Stderr{Stderr: p}})
		}
		return stream.Send(&podsyncv1.ExecResponse{Msg: &podsyncv1.ExecResponse_Stdout{Stdout: p}})
	})
	defer sio.close()
	go sio.pump(func() (sessionFrame, error) {
		m, err := stream.Recv()
		switch {
		case err != nil:
			return sessionFrame{}, err
		case m.GetStart() != nil:
			return sessionFrame{}, InvalidRequest(s.validator.ValidateExecStart(nil))
		}
		return sessionFrame{stdin: m.GetStdin(), resize: m.GetResize(), closeStdin: m.GetCloseStdin() != nil}, nil
	})
	code, err := s.backend(ctx).Sessions.Exec(ctx, ref, start.GetCommand(), sio.options(s.idleTimeout))
	sl.end(code, err)
	if err != nil {
		return sessionError(err, ref.Container)
	}
	return stream.Send(&podsyncv1.ExecResponse{Msg: &podsyncv1.ExecResponse_Exit{Exit: &podsyncv1.SessionExit{ExitCode: int32(code)}}})
}

// Attach attaches the caller's streams to a container.
func (s *service) Attach(stream grpc.BidiStreamingServer[podsyncv1.AttachRequest, podsyncv1.AttachResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if err := InvalidRequest(s.validator.ValidateAttachStart(start)); err != nil {
		return err
	}
	ref := engine.ContainerRef{Namespace: orDefaultNamespace(start.GetNamespace()), Name: start.GetName(), Container: start.GetContainer()}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	sl := s.startSession(ctx, sessionAttach, ref, nil, start.GetStdin(), start.GetTty())
	sio := newSessionIO(ctx, cancel, sl, start.GetStdin(), start.GetTty(), start.GetTerminalSize(), func(p []byte, stderr bool) error {
		if stderr {
			return stream.Send(&podsyncv1.AttachResponse{Msg: &podsyncv1.AttachResponse_Stderr{Stderr: p}})
		}
		return stream.Send(&podsyncv1.AttachResponse{Msg: &podsyncv1.AttachResponse_Stdout{Stdout: p}})
	})
	defer sio.close()
	go sio.pump(func() (sessionFrame, error) {
		m, err := stream.Recv()
		switch {
		case err != nil:
			return sessionFrame{}, err
		case m.GetStart() != nil:
			return sessionFrame{}, InvalidRequest(s.validator.ValidateAttachStart(nil))
		}
		return sessionFrame{stdin: m.GetStdin(), resize: m.GetResize(), closeStdin: m.GetCloseStdin() != nil}, nil
	})
	code, err := s.backend(ctx).Sessions.Attach(ctx, ref, sio.options(s.idleTimeout))
	sl.end(code, err)
	if err != nil {
		return sessionError(err, ref.Container)
	}
	return stream.Send(&podsyncv1.AttachResponse{Msg: &podsyncv1.AttachResponse_Exit{Exit: &podsyncv1.SessionExit{ExitCode: int32(code)}}})
}

// sessionError gives a session's engine error its reason.
func sessionError(err error, container string) error {
	switch {
	case errors.Is(err, errdefs.ErrNotRunning):
		return WithReason(err, errorinfo.ReasonContainerNotRunning, map[string]string{errorinfo.MetadataContainer: container})
	case errors.Is(err, errdefs.ErrNotFound) && container != "":
		return WithReason(err, errorinfo.ReasonContainerNotFound, map[string]string{errorinfo.MetadataContainer: container})
	}
	return err
}

// sessionFrame is one request of a session after its start.
type sessionFrame struct {
	stdin      []byte
	resize     *podsyncv1.TerminalSize
	closeStdin bool
}

// sessionIO bridges a session's gRPC stream to the engine's streams. The
// stdin pipe and the resize channel hold nothing: a caller's stdin waits
// until the process reads it.
type sessionIO struct {
	ctx    context.Context
	cancel context.CancelFunc
	sl     *sessionLog
	pr     *io.PipeReader
	pw     *io.PipeWriter
	resize chan engine.TerminalSize
	first  *podsyncv1.TerminalSize
	// stdin and tty: what the session asked for. Without them, stdin
	// frames and resizes are dropped.
	stdin, tty bool
	// sendMu serialises Send: stdout and stderr are copied concurrently.
	sendMu sync.Mutex
	send   func(p []byte, stderr bool) error
}

func newSessionIO(ctx context.Context, cancel context.CancelFunc, sl *sessionLog, stdin, tty bool, first *podsyncv1.TerminalSize, send func([]byte, bool) error) *sessionIO {
	pr, pw := io.Pipe()
	return &sessionIO{ctx: ctx, cancel: cancel, sl: sl, pr: pr, pw: pw, resize: make(chan engine.TerminalSize),
		first: first, stdin: stdin, tty: tty, send: send}
}

// pump reads the caller's requests until its stream ends: stdin into the
// pipe, resizes into the channel. Half-closing the stream closes stdin;
// a broken stream cancels the session.
func (x *sessionIO) pump(recv func() (sessionFrame, error)) {
	if f := x.first; x.tty && f != nil && f.GetWidth() > 0 && f.GetHeight() > 0 {
		if !x.deliver(engine.TerminalSize{Width: uint16(f.GetWidth()), Height: uint16(f.GetHeight())}) {
			return
		}
	}
	for {
		f, err := recv()
		if errors.Is(err, io.EOF) {
			_ = x.pw.Close()
			return
		}
		if err != nil {
			_ = x.pw.CloseWithError(err)
			x.cancel()
			return
		}
		if len(f.stdin) > 0 && x.stdin {
			if _, err := x.pw.Write(f.stdin); err != nil {
				// stdin closed, or the session is over: drop it.
				continue
			}
			x.sl.in.Add(int64(len(f.stdin)))
		}
		if r := f.resize; r != nil && x.tty && !x.deliver(engine.TerminalSize{Width: uint16(r.GetWidth()), Height: uint16(r.GetHeight())}) {
			return
		}
		if f.closeStdin {
			_ = x.pw.Close()
		}
	}
}

func (x *sessionIO) deliver(s engine.TerminalSize) bool {
	select {
	case x.resize <- s:
		return true
	case <-x.ctx.Done():
		return false
	}
}

// options are the engine's streams of the session.
func (x *sessionIO) options(idle time.Duration) engine.StreamOptions {
	o := engine.StreamOptions{
		Stdout: frameWriter{x: x}, Stderr: frameWriter{x: x, stderr: true},
		TTY: x.tty, IdleTimeout: idle,
	}
	if x.stdin {
		o.Stdin = x.pr
	}
	if x.tty {
		o.Resize = x.resize
	}
	return o
}

// close ends the stdin pipe so that a pump blocked on it returns.
func (x *sessionIO) close() {
	_ = x.pr.CloseWithError(io.ErrClosedPipe)
}

// frameWriter sends what it is given as stdout or stderr frames.
type frameWriter struct {
	x      *sessionIO
	stderr bool
}

func (w frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxFrameBytes)]
		w.x.sendMu.Lock()
		err := w.x.send(chunk, w.stderr)
		w.x.sendMu.Unlock()
		if err != nil {
			return n, err
		}
		n += len(chunk)
		w.x.sl.out.Add(int64(len(chunk)))
		p = p[len(chunk):]
	}
	return n, nil
}

// sessionLog logs and counts one session: a line when it starts and one
// when it ends, with the caller's identity (from the request scope), the
// pod, container, command, duration and bytes.
type sessionLog struct {
	log     *zap.Logger
	kind    string
	started time.Time
	metrics *SessionMetrics
	in, out counter
}

// counter counts a session's bytes into its metrics as they move.
type counter struct {
	add func(int64)
	mu  sync.Mutex
	n   int64
}

func (c *counter) Add(n int64) {
	c.mu.Lock()
	c.n += n
	c.mu.Unlock()
	if c.add != nil {
		c.add(n)
	}
}

func (c *counter) get() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (s *service) startSession(ctx context.Context, kind string, ref engine.ContainerRef, cmd []string, stdin, tty bool) *sessionLog {
	fields := []zap.Field{zap.String("session", kind), zap.String(logx.PodNamespace, ref.Namespace), zap.String(logx.PodName, ref.Name)}
	if ref.Container != "" {
		fields = append(fields, zap.String(logx.ContainerName, ref.Container))
	}
	if cmd != nil {
		fields = append(fields, zap.Strings("command", cmd))
	}
	if kind == sessionExec || kind == sessionAttach {
		fields = append(fields, zap.Bool("stdin", stdin), zap.Bool("tty", tty))
	}
	sl := &sessionLog{log: logx.From(ctx, s.log).With(fields...), kind: kind, started: time.Now(), metrics: s.sessions}
	sl.in.add = s.sessions.bytes(kind, "in")
	sl.out.add = s.sessions.bytes(kind, "out")
	s.sessions.opened(kind)
	sl.log.Info("session started")
	return sl
}

func (sl *sessionLog) end(exitCode int, err error) {
	sl.metrics.closed(sl.kind)
	fields := []zap.Field{zap.Duration(logx.Duration, time.Since(sl.started)),
		zap.Int64("bytes_in", sl.in.get()), zap.Int64("bytes_out", sl.out.get())}
	if err != nil {
		sl.log.Info("session failed", append(fields, zap.Error(err))...)
		return
	}
	if sl.kind != sessionPortForward {
		fields = append(fields, zap.Int("exit_code", exitCode))
	}
	sl.log.Info("session ended", fields...)
}
