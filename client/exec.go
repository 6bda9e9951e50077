package client

import (
	"context"
	"errors"
	"io"
	"sync"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// stdinChunk is the most bytes of stdin one message carries.
const stdinChunk = 32 << 10

// TerminalSize is a terminal's size in character cells.
type TerminalSize struct{ Width, Height uint16 }

// StreamOptions are the standard streams of an Exec or Attach session, as
// client-go's remotecommand.StreamOptions.
type StreamOptions struct {
	// Stdin, if set, is copied to the process's standard input until it
	// returns io.EOF, which closes that input.
	Stdin io.Reader
	// Stdout and Stderr receive the process's output; nil discards it.
	// With TTY, everything arrives on Stdout. A Write that blocks slows
	// the process's output down.
	Stdout, Stderr io.Writer
	// TTY runs the process on a terminal.
	TTY bool
	// TerminalSizes, with TTY, delivers the terminal's size: the first
	// value is the initial size, later ones resize it. It may be nil.
	TerminalSizes <-chan TerminalSize
}

// ExecOptions name the container and command of an Exec.
type ExecOptions struct {
	Namespace, Name string
	// Container may be empty when the pod has one container.
	Container string
	// Command and its arguments, run without a shell; required.
	Command []string
	StreamOptions
}

// AttachOptions name the container of an Attach.
type AttachOptions struct {
	Namespace, Name string
	// Container may be empty when the pod has one container.
	Container string
	StreamOptions
}

// ExecSync runs a command in a running container and returns its output
// (each stream capped at 1 MiB) and exit code. A non-zero exit code is a
// result, not an error. Errors: ErrNotFound, ErrFailedPrecondition (reason
// ReasonContainerNotRunning), ErrInvalidArgument, ErrPermissionDenied
// without the exec role. It is never retried: the command would run
// twice.
func (c *Client) ExecSync(ctx context.Context, req *podsyncv1.ExecSyncRequest) (*podsyncv1.ExecSyncResponse, error) {
	resp, err := c.api.ExecSync(ctx, req)
	if err != nil {
		return nil, wrap("ExecSync", podName(req.GetNamespace(), req.GetName()), err)
	}
	return resp, nil
}

// Exec runs o.Command in a running container with o's streams, as
// kubectl exec, and returns its exit code once it exits. Cancelling ctx
// ends the session (and the command's streams; the runtime decides
// whether the command goes on). Errors as ExecSync, and ErrUnavailable
// when the session broke. It is never retried.
func (c *Client) Exec(ctx context.Context, o ExecOptions) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.api.Exec(ctx)
	if err != nil {
		return 0, wrap("Exec", podName(o.Namespace, o.Name), err)
	}
	start := &podsyncv1.ExecStart{Namespace: o.Namespace, Name: o.Name, Container: o.Container, Command: o.Command,
		Stdin: o.Stdin != nil, Tty: o.TTY}
	s := session{
		send: func(m sessionMsg) error {
			switch {
			case m.start:
				return stream.Send(&podsyncv1.ExecRequest{Msg: &podsyncv1.ExecRequest_Start{Start: start}})
			case m.resize != nil:
				return stream.Send(&podsyncv1.ExecRequest{Msg: &podsyncv1.ExecRequest_Resize{Resize: m.resize}})
			case m.closeStdin:
				return stream.Send(&podsyncv1.ExecRequest{Msg: &podsyncv1.ExecRequest_CloseStdin{CloseStdin: &podsyncv1.StdinClose{}}})
			}
			return stream.Send(&podsyncv1.ExecRequest{Msg: &podsyncv1.ExecRequest_Stdin{Stdin: m.stdin}})
		},
		recv: func() (stdout, stderr []byte, exit *podsyncv1.SessionExit, err error) {
			m, err := stream.Recv()
			return m.GetStdout(), m.GetStderr(), m.GetExit(), err
		},
		setSize: func(t *podsyncv1.TerminalSize) { start.TerminalSize = t },
	}
	code, err := s.run(ctx, o.StreamOptions)
	if err != nil {
		return 0, wrap("Exec", podName(o.Namespace, o.Name), err)
	}
	return code, nil
}

// Attach attaches o's streams to the main process of a running
// container, as kubectl attach (stdin needs the container's stdin: true,
// a TTY its tty: true). It returns the container's exit code when it
// exited while attached, else 0 when ctx ends. Errors as Exec.
func (c *Client) Attach(ctx context.Context, o AttachOptions) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.api.Attach(ctx)
	if err != nil {
		return 0, wrap("Attach", podName(o.Namespace, o.Name), err)
	}
	start := &podsyncv1.AttachStart{Namespace: o.Namespace, Name: o.Name, Container: o.Container, Stdin: o.Stdin != nil, Tty: o.TTY}
	s := session{
		send: func(m sessionMsg) error {
			switch {
			case m.start:
				return stream.Send(&podsyncv1.AttachRequest{Msg: &podsyncv1.AttachRequest_Start{Start: start}})
			case m.resize != nil:
				return stream.Send(&podsyncv1.AttachRequest{Msg: &podsyncv1.AttachRequest_Resize{Resize: m.resize}})
			case m.closeStdin:
				return stream.Send(&podsyncv1.AttachRequest{Msg: &podsyncv1.AttachRequest_CloseStdin{CloseStdin: &podsyncv1.StdinClose{}}})
			}
			return stream.Send(&podsyncv1.AttachRequest{Msg: &podsyncv1.AttachRequest_Stdin{Stdin: m.stdin}})
		},
		recv: func() (stdout, stderr []byte, exit *podsyncv1.SessionExit, err error) {
			m, err := stream.Recv()
			return m.GetStdout(), m.GetStderr(), m.GetExit(), err
		},
		setSize: func(t *podsyncv1.TerminalSize) { start.TerminalSize = t },
	}
	code, err := s.run(ctx, o.StreamOptions)
	if err != nil {
		return 0, wrap("Attach", podName(o.Namespace, o.Name), err)
	}
	return code, nil
}

// sessionMsg is one request of a session: the start, stdin bytes, a
// resize or the close of stdin.
type sessionMsg struct {
	start      bool
	stdin      []byte
	resize     *podsyncv1.TerminalSize
	closeStdin bool
}

// session runs the caller's side of Exec or Attach over their messages.
type session struct {
	send    func(sessionMsg) error
	recv    func() (stdout, stderr []byte, exit *podsyncv1.SessionExit, err error)
	setSize func(*podsyncv1.TerminalSize)
	mu      sync.Mutex // Send is not safe for concurrent use
}

func (s *session) sendLocked(m sessionMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.send(m)
}

func (s *session) run(ctx context.Context, o StreamOptions) (int, error) {
	sizes := o.TerminalSizes
	if o.TTY && sizes != nil {
		select {
		case sz, ok := <-sizes:
			if ok {
				s.setSize(&podsyncv1.TerminalSize{Width: uint32(sz.Width), Height: uint32(sz.Height)})
			} else {
				sizes = nil
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if err := s.sendLocked(sessionMsg{start: true}); err != nil {
		return 0, s.recvErr(err)
	}
	if o.TTY && sizes != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case sz, ok := <-sizes:
					if !ok || s.sendLocked(sessionMsg{resize: &podsyncv1.TerminalSize{Width: uint32(sz.Width), Height: uint32(sz.Height)}}) != nil {
						return
					}
				}
			}
		}()
	}
	if o.Stdin != nil {
		// NOTE(h-exec): a Read of o.Stdin that never returns (a terminal)
		// outlives the session, as in kubectl; the stream's Send then
		// fails and the goroutine ends at its next read.
		go func() {
			buf := make([]byte, stdinChunk)
			for {
				n, err := o.Stdin.Read(buf)
				if n > 0 {
					if s.sendLocked(sessionMsg{stdin: append([]byte(nil), buf[:n]...)}) != nil {
						return
					}
				}
				if err != nil {
					_ = s.sendLocked(sessionMsg{closeStdin: true})
					return
				}
			}
		}()
	}
	for {
		stdout, stderr, exit, err := s.recv()
		if err != nil {
			if isEOF(err) {
				return 0, errors.New("the session ended without an exit status")
			}
			return 0, err
		}
		if exit != nil {
			return int(exit.GetExitCode()), nil
		}
		if len(stdout) > 0 && o.Stdout != nil {
			if _, err := o.Stdout.Write(stdout); err != nil {
				return 0, err
			}
		}
		if len(stderr) > 0 && o.Stderr != nil {
			if _, err := o.Stderr.Write(stderr); err != nil {
				return 0, err
			}
		}
	}
}

// recvErr is the stream's status after a failed Send: gRPC reports a
// refused stream's status on Recv.
func (s *session) recvErr(sendErr error) error {
	if _, _, _, err := s.recv(); err != nil && !isEOF(err) {
		return err
	}
	return sendErr
}

// PortForward forwards one connection, conn, to port in the pod's network
// namespace, as kubectl port-forward forwards each accepted connection:
// what conn reads goes to the pod until io.EOF, which half-closes the
// pod's side; what the pod sends is written to conn. It returns when the
// pod closed the connection. Errors: ErrNotFound, ErrFailedPrecondition
// (ReasonPodNotRunning), ErrUnavailable (ReasonStreamFailed: nothing
// listens on the port, say), ErrPermissionDenied without the exec role.
// A conn with CloseWrite (a *net.TCPConn) is half-closed when the pod
// closes.
func (c *Client) PortForward(ctx context.Context, namespace, name string, port uint32, conn io.ReadWriter) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	object := podName(namespace, name)
	stream, err := c.api.PortForward(ctx)
	if err != nil {
		return wrap("PortForward", object, err)
	}
	if err := stream.Send(&podsyncv1.PortForwardRequest{Msg: &podsyncv1.PortForwardRequest_Start{
		Start: &podsyncv1.PortForwardStart{Namespace: namespace, Name: name, Port: port}}}); err != nil {
		_, rerr := stream.Recv()
		return wrap("PortForward", object, rerr)
	}
	go func() {
		buf := make([]byte, stdinChunk)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				if stream.Send(&podsyncv1.PortForwardRequest{Msg: &podsyncv1.PortForwardRequest_Data{Data: append([]byte(nil), buf[:n]...)}}) != nil {
					return
				}
			}
			if err != nil {
				_ = stream.CloseSend()
				return
			}
		}
	}()
	for {
		m, err := stream.Recv()
		if err != nil {
			if cw, ok := conn.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			if isEOF(err) {
				return nil
			}
			return wrap("PortForward", object, err)
		}
		if _, err := conn.Write(m.GetData()); err != nil {
			return err
		}
	}
}
