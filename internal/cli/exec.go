package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

// streamFlags are the flags exec and attach share with kubectl.
type streamFlags struct {
	namespace string
	container string
	stdin     bool
	tty       bool
}

func (f *streamFlags) register(cmd *cobra.Command, verb string) {
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", `namespace of the pod (default "default")`)
	cmd.Flags().StringVarP(&f.container, "container", "c", "", "container name; may be omitted when the pod has one container")
	cmd.Flags().BoolVarP(&f.stdin, "stdin", "i", false, "pass standard input to the "+verb)
	cmd.Flags().BoolVarP(&f.tty, "tty", "t", false, "run on a terminal: standard input must be one; it is put in raw mode and its size follows the window")
}

func (a *app) newExecCommand() *cobra.Command {
	var f streamFlags
	cmd := &cobra.Command{
		Use:   "exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARG...]",
		Short: "Run a command in a running container",
		Long: "exec runs a command in a running container of a pod, as kubectl exec does: its\n" +
			"output is printed as it comes, -i passes standard input to it, -t runs it on a\n" +
			"terminal (with -i: an interactive shell). podsyncctl exits with the command's\n" +
			"exit code. It needs the exec role (or admin).",
		Example: "  podsyncctl exec web -- ls /\n" +
			"  echo data | podsyncctl exec -i web -- cat\n" +
			"  podsyncctl exec -it web -c sidecar -- sh",
		Args: usageArgs(func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return errors.New("exec needs a pod and, after --, a command: podsyncctl exec POD -- COMMAND [ARG...]")
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if args[0], err = podArg(args[0]); err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			if f.container, err = a.defaultContainer(cmd.Context(), c, f.namespace, args[0], f.container); err != nil {
				return err
			}
			ctx, cancel := a.waitContext(cmd.Context())
			defer cancel()
			return a.runSession(ctx, f, func(ctx context.Context, so client.StreamOptions) (int, error) {
				return c.Exec(ctx, client.ExecOptions{Namespace: f.namespace, Name: args[0], Container: f.container,
					Command: args[1:], StreamOptions: so})
			})
		},
		ValidArgsFunction: a.completePodNames(&f.namespace),
	}
	f.register(cmd, "command")
	return cmd
}

func (a *app) newAttachCommand() *cobra.Command {
	var f streamFlags
	cmd := &cobra.Command{
		Use:   "attach POD [-c CONTAINER] [-i] [-t]",
		Short: "Attach to the main process of a running container",
		Long: "attach connects to the standard streams of a running container's main process,\n" +
			"as kubectl attach does: -i passes standard input (the container needs stdin:\n" +
			"true), -t a terminal (it needs tty: true). Interrupt to detach; the container\n" +
			"goes on. It needs the exec role (or admin).",
		Example: "  podsyncctl attach web\n" +
			"  podsyncctl attach -it shell",
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if args[0], err = podArg(args[0]); err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			if f.container, err = a.defaultContainer(cmd.Context(), c, f.namespace, args[0], f.container); err != nil {
				return err
			}
			ctx, cancel := a.waitContext(cmd.Context())
			defer cancel()
			err = a.runSession(ctx, f, func(ctx context.Context, so client.StreamOptions) (int, error) {
				return c.Attach(ctx, client.AttachOptions{Namespace: f.namespace, Name: args[0], Container: f.container, StreamOptions: so})
			})
			if cmd.Context().Err() != nil && isCanceled(err) {
				return nil // ^C detaches
			}
			return err
		},
		ValidArgsFunction: a.completePodNames(&f.namespace),
	}
	f.register(cmd, "container")
	return cmd
}

// runSession runs an exec or attach session on podsyncctl's streams: with
// -t on a raw terminal whose size follows SIGWINCH. A non-zero exit code
// of the process becomes podsyncctl's.
func (a *app) runSession(ctx context.Context, f streamFlags, run func(context.Context, client.StreamOptions) (int, error)) error {
	so := client.StreamOptions{Stdout: a.stdout, Stderr: a.stderr}
	if f.stdin {
		so.Stdin = a.stdin
	}
	in, isFile := a.stdin.(*os.File)
	if f.tty && (!f.stdin || !isFile || !term.IsTerminal(int(in.Fd()))) {
		// kubectl's rule: no terminal to give, run without one.
		_, _ = fmt.Fprintln(a.stderr, "Unable to use a TTY: -t needs -i and standard input on a terminal; running without one.")
		f.tty = false
	}
	if f.tty {
		fd := int(in.Fd())
		state, err := term.MakeRaw(fd)
		if err != nil {
			return fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		defer func() { _ = term.Restore(fd, state) }()
		so.TTY = true
		sizes := make(chan client.TerminalSize, 1)
		if w, h, err := term.GetSize(fd); err == nil {
			sizes <- client.TerminalSize{Width: uint16(w), Height: uint16(h)}
		} else {
			sizes <- client.TerminalSize{Width: 80, Height: 24}
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, unix.SIGWINCH)
		defer signal.Stop(winch)
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			for {
				select {
				case <-sctx.Done():
					return
				case <-winch:
					if w, h, err := term.GetSize(fd); err == nil {
						select {
						case sizes <- client.TerminalSize{Width: uint16(w), Height: uint16(h)}:
						case <-sctx.Done():
							return
						}
					}
				}
			}
		}()
		so.TerminalSizes = sizes
	}
	code, err := run(ctx, so)
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// defaultContainerAnnotation names a pod's default container, as kubectl
// reads it.
const defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// defaultContainer is kubectl's choice of a container when -c is not
// given: the pod's annotated default, else its first container; when the
// pod has several, it says so on stderr ("Defaulted container "app" out
// of: app, sidecar, migrate (init)"), as kubectl does. A named container
// is returned as it is.
func (a *app) defaultContainer(ctx context.Context, c *client.Client, namespace, pod, container string) (string, error) {
	if container != "" {
		return container, nil
	}
	gctx, cancel := a.callContext(ctx)
	defer cancel()
	resp, err := c.GetPod(gctx, namespaceOr(namespace), pod)
	if err != nil {
		return "", err
	}
	return a.podDefaultContainer(resp.GetPod(), "")
}

// podDefaultContainer is defaultContainer for a pod at hand.
func (a *app) podDefaultContainer(p *podsyncv1.Pod, container string) (string, error) {
	if container != "" {
		return container, nil
	}
	spec := p.GetSpec()
	var names []string
	for _, ct := range spec.GetContainers() {
		names = append(names, ct.GetName())
	}
	all := len(names)
	for _, ct := range spec.GetInitContainers() {
		names = append(names, ct.GetName()+" (init)")
	}
	for _, ct := range spec.GetEphemeralContainers() {
		names = append(names, ct.GetName()+" (ephem)")
	}
	if all == 0 {
		return "", nil
	}
	chosen := spec.GetContainers()[0].GetName()
	if want := p.GetMetadata().GetAnnotations()[defaultContainerAnnotation]; want != "" {
		for _, ct := range spec.GetContainers() {
			if ct.GetName() == want {
				chosen = want
			}
		}
	}
	if len(names) > 1 {
		_, _ = fmt.Fprintf(a.stderr, "Defaulted container %q out of: %s\n", chosen, strings.Join(names, ", "))
	}
	return chosen, nil
}
