package provider

import (
	"context"
	"fmt"
	"io"

	utilexec "k8s.io/utils/exec"

	"github.com/podsync/podsync/client"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// streams are the kubelet API's streams of a session as the SDK's; the
// terminal sizes are forwarded until ctx ends.
func streams(ctx context.Context, a api.AttachIO) client.StreamOptions {
	o := client.StreamOptions{TTY: a.TTY()}
	if in := a.Stdin(); in != nil {
		o.Stdin = in
	}
	if out := a.Stdout(); out != nil {
		o.Stdout = out
	}
	if e := a.Stderr(); e != nil {
		o.Stderr = e
	}
	if a.TTY() && a.Resize() != nil {
		sizes := make(chan client.TerminalSize)
		go func() {
			defer close(sizes)
			for {
				select {
				case <-ctx.Done():
					return
				case sz, ok := <-a.Resize():
					if !ok {
						return
					}
					select {
					case sizes <- client.TerminalSize{Width: sz.Width, Height: sz.Height}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
		o.TerminalSizes = sizes
	}
	return o
}

// exitError is a session's non-zero exit code as the kubelet reports it:
// the kubelet API's remotecommand turns it into kubectl's exit code.
func exitError(what string, code int) error {
	if code == 0 {
		return nil
	}
	return utilexec.CodeExitError{Err: fmt.Errorf("%s exited with %d", what, code), Code: code}
}

// RunInContainer runs cmd in a container over podsyncd's Exec, as the
// kubelet API's /exec (kubectl exec).
func (p *Provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, a api.AttachIO) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	code, err := p.ps.Exec(ctx, client.ExecOptions{Namespace: namespace, Name: podName, Container: containerName,
		Command: cmd, StreamOptions: streams(ctx, a)})
	if err != nil {
		return fmt.Errorf("exec in %s/%s on podsync: %w", namespace, podName, err)
	}
	return exitError(fmt.Sprintf("command %q", cmd), code)
}

// AttachToContainer attaches to a container's main process over
// podsyncd's Attach, as the kubelet API's /attach (kubectl attach).
func (p *Provider) AttachToContainer(ctx context.Context, namespace, podName, containerName string, a api.AttachIO) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	code, err := p.ps.Attach(ctx, client.AttachOptions{Namespace: namespace, Name: podName, Container: containerName,
		StreamOptions: streams(ctx, a)})
	if err != nil {
		return fmt.Errorf("attach to %s/%s on podsync: %w", namespace, podName, err)
	}
	return exitError("container "+containerName, code)
}

// PortForward forwards one connection to a port of the pod over
// podsyncd's PortForward, as the kubelet API's /portforward.
func (p *Provider) PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("port-forward to %s/%s: port %d is not a port number", namespace, podName, port)
	}
	if err := p.ps.PortForward(ctx, namespace, podName, uint32(port), stream); err != nil {
		return fmt.Errorf("port-forward to %s/%s port %d on podsync: %w", namespace, podName, port, err)
	}
	return nil
}
