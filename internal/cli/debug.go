package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

// debugFlags are kubectl debug's flags for an ephemeral container.
type debugFlags struct {
	streamFlags
	image      string
	target     string
	pullPolicy string
	attach     bool
}

// debugPoll is how often a debug command without -i reads whether its
// container exited.
const debugPoll = 250 * time.Millisecond

func (a *app) newDebugCommand() *cobra.Command {
	var f debugFlags
	cmd := &cobra.Command{
		Use:   "debug POD --image IMAGE [--target CONTAINER] [-c NAME] [-i] [-t] [-- COMMAND [ARG...]]",
		Short: "Add a debug container to a running pod",
		Long: "debug adds an ephemeral container to a running pod, as kubectl debug does: it\n" +
			"runs IMAGE (with COMMAND, else the image's), once, beside the pod's containers;\n" +
			"--target puts it in that container's process namespace, so that ps shows the\n" +
			"target's processes. podsyncctl waits until it runs, then with -i (and -t)\n" +
			"attaches to it; without -i it prints the container's output until it exits and\n" +
			"exits with its exit code (--attach=false returns once it runs). The container\n" +
			"is never restarted and stops with the pod; its status is in the pod's\n" +
			"ephemeralContainerStatuses. It needs the debug role (or admin).",
		Example: "  podsyncctl debug web --image registry.local/busybox:local --target httpd -- ps\n" +
			"  podsyncctl debug -it web --image registry.local/busybox:local --target httpd -- sh",
		Args: usageArgs(func(cmd *cobra.Command, args []string) error {
			if n := cmd.ArgsLenAtDash(); len(args) < 1 || n == 0 || (n < 0 && len(args) != 1) || n > 1 {
				return errors.New("debug needs a pod and, after --, the command if any: podsyncctl debug POD --image IMAGE [-- COMMAND [ARG...]]")
			}
			if f.image == "" {
				return errors.New("debug needs --image: the image of the debug container, such as --image busybox")
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
			ctx, cancel := a.waitContext(cmd.Context())
			defer cancel()
			return a.debug(ctx, c, f, args[0], args[1:])
		},
		ValidArgsFunction: a.completePodNames(&f.namespace),
	}
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", `namespace of the pod (default "default")`)
	cmd.Flags().StringVarP(&f.container, "container", "c", "", `name of the debug container (default "debugger-" and five random characters)`)
	cmd.Flags().BoolVarP(&f.stdin, "stdin", "i", false, "keep the container's standard input open and attach podsyncctl's to it")
	cmd.Flags().BoolVarP(&f.tty, "tty", "t", false, "give the container a terminal (with -i: an interactive shell)")
	cmd.Flags().StringVar(&f.image, "image", "", "image of the debug container (required)")
	cmd.Flags().StringVar(&f.target, "target", "", "container whose process namespace the debug container joins")
	cmd.Flags().StringVar(&f.pullPolicy, "image-pull-policy", "", "Always, IfNotPresent or Never (default: as a container's)")
	cmd.Flags().BoolVar(&f.attach, "attach", true, "wait for the container: attach to it with -i, else print its output until it exits; false returns once it runs")
	return cmd
}

// debug adds the debug container, waits until it runs, then attaches to
// it (-i) or prints its output until it exits.
func (a *app) debug(ctx context.Context, c *client.Client, f debugFlags, pod string, command []string) error {
	name := f.container
	if name == "" {
		name = "debugger-" + utilrand.String(5)
		_, _ = fmt.Fprintf(a.stderr, "Defaulting debug container name to %s.\n", name)
	}
	ec := &podsyncv1.EphemeralContainer{
		Name: name, Image: f.image, ImagePullPolicy: f.pullPolicy, Command: command,
		Stdin: f.stdin, Tty: f.tty, StdinOnce: f.stdin, TargetContainerName: f.target,
	}
	ns := namespaceOr(f.namespace)
	st, err := c.Debug(ctx, ns, pod, ec)
	var wait *client.ContainerWaitError
	if errors.As(err, &wait) {
		return fmt.Errorf("debug container %s of pod %s/%s does not start: %s: %s", name, ns, pod, wait.Reason, wait.Message)
	}
	if err != nil {
		return err
	}
	if !f.attach {
		return nil
	}
	if f.stdin && st.GetState().GetRunning() != nil {
		_, _ = fmt.Fprintf(a.stderr, "If you don't see a command prompt, try pressing enter.\n")
		err := a.runSession(ctx, f.streamFlags, func(ctx context.Context, so client.StreamOptions) (int, error) {
			return c.Attach(ctx, client.AttachOptions{Namespace: ns, Name: pod, Container: name, StreamOptions: so})
		})
		return err
	}
	return a.followDebug(ctx, c, ns, pod, name)
}

// followDebug prints the debug container's output as it comes until it
// exits, then returns its exit code as podsyncctl's.
func (a *app) followDebug(ctx context.Context, c *client.Client, ns, pod, name string) error {
	req := &podsyncv1.GetContainerLogsRequest{Namespace: ns, Name: pod, Container: name, Follow: true}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	lines := 0
	done := make(chan error, 1)
	go func() {
		done <- c.Logs(fctx, req, func(l *podsyncv1.LogLine) error {
			lines++
			_, err := fmt.Fprintf(a.stdout, "%s\n", l.GetContent())
			return err
		})
	}()
	// wait ends the follower once: after it, lines is safe to read.
	running := done
	var followErr error
	wait := func() {
		stop()
		if running != nil {
			followErr = <-running
			running = nil
		}
	}
	var term *podsyncv1.ContainerStateTerminated
	for term == nil {
		select {
		case <-ctx.Done():
			wait()
			return ctx.Err()
		case err := <-running:
			running = nil
			if !isCanceled(err) {
				return err
			}
		case <-time.After(debugPoll):
		}
		resp, err := c.GetPod(ctx, ns, pod)
		if err != nil {
			wait()
			return err
		}
		for _, s := range resp.GetPod().GetStatus().GetEphemeralContainerStatuses() {
			if s.GetName() == name {
				term = s.GetState().GetTerminated()
			}
		}
	}
	// The follower may not have sent the last lines yet: read the whole
	// log and print what it did not.
	wait()
	if !isCanceled(followErr) {
		return followErr
	}
	seen := 0
	req.Follow = false
	if err := c.Logs(ctx, req, func(l *podsyncv1.LogLine) error {
		seen++
		if seen <= lines {
			return nil
		}
		_, err := fmt.Fprintf(a.stdout, "%s\n", l.GetContent())
		return err
	}); err != nil {
		return err
	}
	if code := term.GetExitCode(); code != 0 {
		return &exitError{code: int(code)}
	}
	return nil
}
