package sessions

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"
	streamspdy "k8s.io/streaming/pkg/httpstream/spdy"
	utilexec "k8s.io/utils/exec"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/logs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
)

// ExecSyncMaxOutput caps each of ExecSync's stdout and stderr: what a
// command writes beyond it is discarded and the result marked truncated.
const ExecSyncMaxOutput = 1 << 20

// DefaultStreamIdleTimeout ends an exec, attach or port-forward session
// without traffic in either direction for that long: the kubelet's
// --streaming-connection-idle-timeout.
const DefaultStreamIdleTimeout = 4 * time.Hour

// ErrSessionIdle ends a session that had no traffic for its idle timeout.
// It wraps context.DeadlineExceeded.
var ErrSessionIdle = fmt.Errorf("session idle: %w", context.DeadlineExceeded)

// ContainerRef names a container of a stored pod.
type ContainerRef struct {
	Namespace, Name string
	// Container may be empty when the pod has exactly one container.
	Container string
}

// ExecSyncResult is what an ExecSync's command wrote and how it ended.
type ExecSyncResult struct {
	// Stdout and Stderr are at most ExecSyncMaxOutput each.
	Stdout, Stderr                   []byte
	StdoutTruncated, StderrTruncated bool
	// ExitCode is the command's; -1 when it timed out.
	ExitCode int
	TimedOut bool
}

// TerminalSize is a terminal's size in cells.
type TerminalSize struct{ Width, Height uint16 }

// StreamOptions are the standard streams of an exec or attach session,
// as remotecommand's StreamOptions.
type StreamOptions struct {
	// Stdin, if set, feeds the process's standard input; its io.EOF
	// closes it.
	Stdin io.Reader
	// Stdout and Stderr receive the output; Stderr is unused with TTY.
	// A Write that blocks holds the process's output back.
	Stdout, Stderr io.Writer
	// TTY runs the process on a terminal.
	TTY bool
	// Resize delivers terminal sizes (with TTY); closing it ends them.
	Resize <-chan TerminalSize
	// IdleTimeout ends the session with ErrSessionIdle when no byte
	// moved and no resize came for that long; zero means
	// DefaultStreamIdleTimeout.
	IdleTimeout time.Duration
}

// Pods finds the stored pods sessions open into (engine/store's Store).
type Pods interface {
	// GetByNameShared returns the stored pod namespace/name, shared (not
	// to be changed), or an error wrapping ErrNotFound.
	GetByNameShared(namespace, name string) (*store.PodRecord, error)
}

// ViewReader reads what the runtime holds of a pod (the syncer).
type ViewReader interface {
	ReadView(ctx context.Context, uid types.UID) (model.RuntimeView, error)
}

// Options configure Sessions.
type Options struct {
	// Runtime runs the commands and serves the streams; required.
	Runtime syncer.Runtime
	// Pods finds the pods; required.
	Pods Pods
	// Views reads the pods' containers; required.
	Views ViewReader
	// RuntimeUnavailable, if set, reports whether the error of a CRI call
	// means that the runtime did not answer; such errors then wrap
	// ErrRuntimeUnavailable.
	RuntimeUnavailable func(error) bool
}

// Sessions open exec, attach and port-forward sessions into the node's
// running pods, and run commands in them (ExecSync), as the kubelet's
// streaming server does for kubectl and crictl.
type Sessions struct {
	rt          syncer.Runtime
	pods        Pods
	views       ViewReader
	unavailable func(error) bool
}

// New returns the Sessions of o.
func New(o Options) *Sessions {
	return &Sessions{rt: o.Runtime, pods: o.Pods, views: o.Views, unavailable: o.RuntimeUnavailable}
}

// runningContainer finds the newest instance of ref's container and
// returns its ID if it runs: ErrNotFound for an unknown pod or container,
// ErrNotRunning when it does not run.
func (s *Sessions) runningContainer(ctx context.Context, ref ContainerRef) (string, error) {
	rec, err := s.pods.GetByNameShared(ref.Namespace, ref.Name)
	if err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	name, err := streamContainer(rec.Pod, ref.Container)
	if err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	view, err := s.views.ReadView(ctx, rec.Pod.UID)
	if err != nil {
		return "", s.runtimeErr(fmt.Errorf("read pod %s/%s from the runtime: %w", ref.Namespace, ref.Name, err))
	}
	i := slices.IndexFunc(view.Containers, func(c model.ContainerInstance) bool { return c.Name == name })
	if i < 0 || view.Containers[i].State != model.ContainerRunning {
		return "", fmt.Errorf("container %q of pod %s/%s: %w", name, ref.Namespace, ref.Name, errdefs.ErrNotRunning)
	}
	return view.Containers[i].ID, nil
}

// streamContainer resolves the container to exec in or attach to: the
// named one (regular, init or ephemeral), or the only regular container.
func streamContainer(pod *corev1.Pod, name string) (string, error) {
	return logs.PodContainer(pod, name)
}

// runtimeErr marks err ErrRuntimeUnavailable when the runtime did not
// answer.
func (s *Sessions) runtimeErr(err error) error {
	return errdefs.RuntimeUnavailable(err, s.unavailable)
}

// ExecSync runs cmd in ref's running container and waits for it: CRI
// ExecSync. timeout, when positive, kills the command after it. A
// non-zero exit code is a result, not an error. It returns ErrNotFound,
// ErrNotRunning, or ErrInvalidSpec for an empty cmd.
func (s *Sessions) ExecSync(ctx context.Context, ref ContainerRef, cmd []string, timeout time.Duration) (ExecSyncResult, error) {
	if len(cmd) == 0 {
		return ExecSyncResult{}, fmt.Errorf("exec: no command: %w", errdefs.ErrInvalidSpec)
	}
	id, err := s.runningContainer(ctx, ref)
	if err != nil {
		return ExecSyncResult{}, fmt.Errorf("exec: %w", err)
	}
	stdout, stderr, err := s.rt.ExecSync(ctx, id, cmd, timeout)
	var res ExecSyncResult
	var exit utilexec.ExitError
	switch {
	case errors.Is(err, criclient.ErrCommandTimedOut):
		res.ExitCode, res.TimedOut = -1, true
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitStatus()
	case err != nil:
		return ExecSyncResult{}, s.runtimeErr(fmt.Errorf("exec in container %s: %w", id, err))
	}
	res.Stdout, res.StdoutTruncated = capBytes(stdout, ExecSyncMaxOutput)
	res.Stderr, res.StderrTruncated = capBytes(stderr, ExecSyncMaxOutput)
	return res, nil
}

func capBytes(b []byte, limit int) ([]byte, bool) {
	if len(b) > limit {
		return b[:limit], true
	}
	return b, false
}

// Exec runs cmd in ref's running container with o's streams, through the
// runtime's streaming server (CRI Exec, then SPDY with client-go's
// remotecommand, as crictl exec does), and returns its exit code when it
// exits. Cancelling ctx ends the session. It returns ErrNotFound,
// ErrNotRunning, ErrInvalidSpec for an empty cmd, ErrSessionIdle, or an
// error wrapping ErrStreamFailed when the session broke.
func (s *Sessions) Exec(ctx context.Context, ref ContainerRef, cmd []string, o StreamOptions) (int, error) {
	if len(cmd) == 0 {
		return 0, fmt.Errorf("exec: no command: %w", errdefs.ErrInvalidSpec)
	}
	id, err := s.runningContainer(ctx, ref)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	resp, err := s.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Tty: o.TTY,
		Stdin: o.Stdin != nil, Stdout: o.Stdout != nil, Stderr: o.Stderr != nil && !o.TTY})
	if err != nil {
		return 0, s.runtimeErr(fmt.Errorf("exec in container %s: %w", id, err))
	}
	return stream(ctx, resp.GetUrl(), o)
}

// Attach attaches o's streams to the main process of ref's running
// container (CRI Attach), as Exec. The exit code is the container's when
// it exited during the session, else 0.
func (s *Sessions) Attach(ctx context.Context, ref ContainerRef, o StreamOptions) (int, error) {
	id, err := s.runningContainer(ctx, ref)
	if err != nil {
		return 0, fmt.Errorf("attach: %w", err)
	}
	resp, err := s.rt.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id, Tty: o.TTY,
		Stdin: o.Stdin != nil, Stdout: o.Stdout != nil, Stderr: o.Stderr != nil && !o.TTY})
	if err != nil {
		return 0, s.runtimeErr(fmt.Errorf("attach to container %s: %w", id, err))
	}
	code, err := stream(ctx, resp.GetUrl(), o)
	if err != nil || code != 0 {
		return code, err
	}
	// The attach protocol carries no exit code: the runtime has it.
	st, serr := s.rt.ContainerStatus(context.WithoutCancel(ctx), id, false)
	if serr == nil && st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		return int(st.GetStatus().GetExitCode()), nil
	}
	return 0, nil
}

// streamURL parses a CRI streaming URL; containerd gives an absolute one.
func streamURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("runtime streaming url %q: %w", raw, err)
	}
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	return u, nil
}

// streamTransport is the client of the runtime's streaming server:
// containerd serves it on the node, with a self-signed certificate when it
// enables TLS, which crictl does not verify either; no proxy stands
// between the agent and its own runtime. Unlike client-go's
// RoundTripperFor, it sends no SPDY keep-alive pings. The server closes
// the connection once the process has exited and the tail of its output
// is in the kernel's buffers; a ping written after that makes the
// runtime's kernel reset the connection, and the tail a slow reader had
// not read yet is lost without an error (kubernetes/kubernetes#124571).
// Pings keep idle connections open through load balancers, and there is
// none between podsyncd and its runtime; the session's idle timeout is
// podsyncd's own.
func streamTransport() (http.RoundTripper, clientspdy.Upgrader, error) {
	rt, err := streamspdy.NewRoundTripperWithConfig(streamspdy.RoundTripperConfig{
		TLS: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the runtime's own server, as crictl
	})
	if err != nil {
		return nil, nil, fmt.Errorf("runtime streaming client: %w", err)
	}
	return rt, clientspdy.NewUpgraderForStreaming(rt), nil
}

// stream runs one remotecommand session against rawURL.
func stream(ctx context.Context, rawURL string, o StreamOptions) (int, error) {
	u, err := streamURL(rawURL)
	if err != nil {
		return 0, err
	}
	tr, upgrader, err := streamTransport()
	if err != nil {
		return 0, err
	}
	exec, err := remotecommand.NewSPDYExecutorForTransports(tr, upgrader, http.MethodPost, u)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", u.Redacted(), err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := newIdleTimer(o.IdleTimeout, func() { cancel(ErrSessionIdle) })
	defer idle.stop()

	so := remotecommand.StreamOptions{Tty: o.TTY}
	if o.Stdin != nil {
		so.Stdin = idleReader{r: o.Stdin, t: idle}
	}
	if o.Stdout != nil {
		so.Stdout = idleWriter{w: o.Stdout, t: idle}
	}
	if o.Stderr != nil && !o.TTY {
		so.Stderr = idleWriter{w: o.Stderr, t: idle}
	}
	if o.TTY && o.Resize != nil {
		so.TerminalSizeQueue = &sizeQueue{ctx: ctx, c: o.Resize, t: idle}
	}
	err = exec.StreamWithContext(ctx, so)
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		return exit.ExitStatus(), nil
	case context.Cause(ctx) != nil && ctx.Err() != nil:
		return 0, context.Cause(ctx)
	}
	return 0, fmt.Errorf("%w: %w", errdefs.ErrStreamFailed, err)
}

// sizeQueue is remotecommand's TerminalSizeQueue over a channel.
type sizeQueue struct {
	ctx context.Context
	c   <-chan TerminalSize
	t   *idleTimer
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case <-q.ctx.Done():
		return nil
	case s, ok := <-q.c:
		if !ok {
			return nil
		}
		q.t.touch()
		return &remotecommand.TerminalSize{Width: s.Width, Height: s.Height}
	}
}

// idleTimer calls fire when touch was not called for d.
type idleTimer struct {
	d time.Duration
	t *time.Timer
}

func newIdleTimer(d time.Duration, fire func()) *idleTimer {
	if d <= 0 {
		d = DefaultStreamIdleTimeout
	}
	return &idleTimer{d: d, t: time.AfterFunc(d, fire)}
}

func (t *idleTimer) touch() { t.t.Reset(t.d) }
func (t *idleTimer) stop()  { t.t.Stop() }

type idleReader struct {
	r io.Reader
	t *idleTimer
}

func (r idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.t.touch()
	}
	return n, err
}

type idleWriter struct {
	w io.Writer
	t *idleTimer
}

func (w idleWriter) Write(p []byte) (int, error) {
	w.t.touch()
	n, err := w.w.Write(p)
	w.t.touch()
	return n, err
}

// PortForward forwards one connection to port in the pod's network
// namespace (CRI PortForward, then client-go's SPDY dialer and the
// portforward.k8s.io protocol, as kubectl port-forward forwards each
// accepted connection): what in yields goes to the pod until its io.EOF
// half-closes the connection, what the pod sends goes to out. It returns
// when the pod closed its side, with ErrNotFound, ErrNotRunning (no ready
// sandbox), ErrSessionIdle, or an error wrapping ErrStreamFailed with the
// runtime's message (nothing listens on the port, say).
func (s *Sessions) PortForward(ctx context.Context, namespace, name string, port int32, in io.Reader, out io.Writer, idleTimeout time.Duration) error {
	rec, err := s.pods.GetByNameShared(namespace, name)
	if err != nil {
		return fmt.Errorf("port-forward to pod %s/%s: %w", namespace, name, err)
	}
	view, err := s.views.ReadView(ctx, rec.Pod.UID)
	if err != nil {
		return s.runtimeErr(fmt.Errorf("read pod %s/%s from the runtime: %w", namespace, name, err))
	}
	if len(view.Sandboxes) == 0 || view.Sandboxes[0].State != model.SandboxReady {
		return fmt.Errorf("port-forward to pod %s/%s: sandbox %w", namespace, name, errdefs.ErrNotRunning)
	}
	resp, err := s.rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: view.Sandboxes[0].ID, Port: []int32{port}})
	if err != nil {
		return s.runtimeErr(fmt.Errorf("port-forward to sandbox %s: %w", view.Sandboxes[0].ID, err))
	}
	u, err := streamURL(resp.GetUrl())
	if err != nil {
		return err
	}
	tr, upgrader, err := streamTransport()
	if err != nil {
		return fmt.Errorf("port-forward: %w", err)
	}
	conn, _, err := clientspdy.NewDialer(upgrader, &http.Client{Transport: tr}, http.MethodPost, u).Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return fmt.Errorf("port-forward to pod %s/%s: %w: %w", namespace, name, errdefs.ErrStreamFailed, err)
	}
	defer func() { _ = conn.Close() }()

	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := newIdleTimer(idleTimeout, func() { cancel(ErrSessionIdle) })
	defer idle.stop()

	// The streams of one forwarded connection, as client-go's
	// PortForwarder.handleConnection opens them.
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errorStream, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("port-forward error stream: %w: %w", errdefs.ErrStreamFailed, err)
	}
	_ = errorStream.Close() // nothing to write on it
	errc := make(chan []byte, 1)
	go func() {
		msg, _ := io.ReadAll(errorStream)
		errc <- msg
	}()
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("port-forward data stream: %w: %w", errdefs.ErrStreamFailed, err)
	}

	// The copy from in is not waited for: in is the caller's, and ends
	// when the caller's stream does.
	go func() {
		// A closed write side of data half-closes the pod's connection.
		_, _ = io.Copy(idleWriter{w: data, t: idle}, idleReader{r: in, t: idle})
		_ = data.Close()
	}()
	remote := make(chan error, 1)
	go func() {
		_, err := io.Copy(idleWriter{w: out, t: idle}, idleReader{r: data, t: idle})
		remote <- err
	}()
	var copyErr error
	select {
	case copyErr = <-remote:
	case <-sctx.Done():
	}
	// Reset before reading the error stream, as client-go does: unsent
	// data would hold the error back. The runtime writes the error of the
	// forward (a refused dial) and closes the stream once it is over.
	_ = data.Reset()
	var msg []byte
	select {
	case msg = <-errc:
	case <-sctx.Done():
	case <-time.After(5 * time.Second):
	}
	switch {
	case len(msg) > 0:
		return fmt.Errorf("port-forward to pod %s/%s port %d: %w: %s", namespace, name, port, errdefs.ErrStreamFailed, msg)
	case errors.Is(context.Cause(sctx), ErrSessionIdle):
		return ErrSessionIdle
	case ctx.Err() != nil:
		return ctx.Err()
	case copyErr != nil:
		return fmt.Errorf("port-forward to pod %s/%s port %d: %w: %w", namespace, name, port, errdefs.ErrStreamFailed, copyErr)
	}
	return nil
}
