package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/podsync/podsync/client"
)

// portForwardFlags are port-forward's flags.
type portForwardFlags struct {
	namespace string
	addresses []string
}

// forwardedPort is one LOCAL:REMOTE argument.
type forwardedPort struct {
	local, remote uint16
	// name is the remote port's name (LOCAL:http), resolved to remote
	// from the pod's container ports (resolvePortNames).
	name string
}

// parsePorts reads kubectl's port arguments: REMOTE (the same local
// port), LOCAL:REMOTE, or :REMOTE (a free local port); REMOTE may be a
// container port's name when LOCAL is given (18080:http).
func parsePorts(args []string) ([]forwardedPort, error) {
	var out []forwardedPort
	for _, a := range args {
		local, remote, found := strings.Cut(a, ":")
		if !found {
			remote = local
		}
		r, err := strconv.ParseUint(remote, 10, 16)
		if err != nil && found && local != "" && remote != "" && strings.IndexFunc(remote, func(c rune) bool { return c < '0' || c > '9' }) >= 0 {
			l, lerr := strconv.ParseUint(local, 10, 16)
			if lerr != nil {
				return nil, fmt.Errorf("port %q: the local port must be a number from 0 to 65535", a)
			}
			out = append(out, forwardedPort{local: uint16(l), name: remote})
			continue
		}
		if err != nil || r == 0 {
			return nil, fmt.Errorf("port %q: the remote port must be a number from 1 to 65535, or a container port's name after LOCAL: (18080:http)", a)
		}
		var l uint64
		switch {
		case found && local == "":
			l = 0
		default:
			l, err = strconv.ParseUint(local, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("port %q: the local port must be a number from 0 to 65535", a)
			}
		}
		out = append(out, forwardedPort{local: uint16(l), remote: uint16(r)})
	}
	return out, nil
}

func (a *app) newPortForwardCommand() *cobra.Command {
	var f portForwardFlags
	cmd := &cobra.Command{
		Use:   "port-forward POD [LOCAL:]REMOTE...",
		Short: "Forward local ports to a pod",
		Long: "port-forward listens on local ports and forwards each connection to a port of\n" +
			"the pod's network namespace, as kubectl port-forward does: REMOTE listens on the\n" +
			"same local port, LOCAL:REMOTE on LOCAL, :REMOTE on a free one. It listens on\n" +
			"127.0.0.1 unless --address says otherwise, until interrupted. A connection that\n" +
			"fails (nothing listens in the pod, say) is reported and closed; the others go\n" +
			"on. It needs the exec role (or admin).",
		Example: "  podsyncctl port-forward web 18081:8080\n" +
			"  podsyncctl port-forward db :5432 --address 127.0.0.1,::1",
		Args: usageArgs(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			pod, err := podArg(args[0])
			if err != nil {
				return err
			}
			args[0] = pod
			ports, err := parsePorts(args[1:])
			if err != nil {
				return usageError{err}
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			if err := a.resolvePortNames(cmd.Context(), c, f.namespace, args[0], ports); err != nil {
				return err
			}
			ctx, cancel := a.waitContext(cmd.Context())
			defer cancel()
			err = a.portForward(ctx, c, f, args[0], ports)
			if cmd.Context().Err() != nil && (err == nil || isCanceled(err)) {
				return nil // ^C is how it ends
			}
			return err
		},
		ValidArgsFunction: a.completePodNames(&f.namespace),
	}
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", `namespace of the pod (default "default")`)
	cmd.Flags().StringSliceVar(&f.addresses, "address", []string{"127.0.0.1"}, "local addresses to listen on, comma-separated")
	return cmd
}

// resolvePortNames gives each named port the number of the pod's
// container port of that name, as kubectl looks it up.
func (a *app) resolvePortNames(ctx context.Context, c *client.Client, namespace, pod string, ports []forwardedPort) error {
	if !slices.ContainsFunc(ports, func(p forwardedPort) bool { return p.name != "" }) {
		return nil
	}
	gctx, cancel := a.callContext(ctx)
	defer cancel()
	resp, err := c.GetPod(gctx, namespaceOr(namespace), pod)
	if err != nil {
		return err
	}
	spec := resp.GetPod().GetSpec()
	for i := range ports {
		if ports[i].name == "" {
			continue
		}
		for _, ct := range slices.Concat(spec.GetInitContainers(), spec.GetContainers()) {
			for _, cp := range ct.GetPorts() {
				if cp.GetName() == ports[i].name {
					ports[i].remote = uint16(cp.GetContainerPort()) //nolint:gosec // a port, validated.
				}
			}
		}
		if ports[i].remote == 0 {
			return failed("pod %s/%s has no container port named %q", namespaceOr(namespace), pod, ports[i].name)
		}
	}
	return nil
}

// portForward listens on every address and port and forwards each
// accepted connection on its own stream until ctx ends.
func (a *app) portForward(ctx context.Context, c *client.Client, f portForwardFlags, pod string, ports []forwardedPort) error {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	var lc net.ListenConfig
	for _, p := range ports {
		for _, addr := range f.addresses {
			l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(int(p.local))))
			if err != nil {
				return failed("listen on %s port %d: %s", addr, p.local, errText(err))
			}
			listeners = append(listeners, l)
			_, _ = fmt.Fprintf(a.stdout, "Forwarding from %s -> %d\n", l.Addr(), p.remote)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // a.stderr
	for i, l := range listeners {
		remote := ports[i/len(f.addresses)].remote
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				conn, err := l.Accept()
				if err != nil {
					return // closed at the end
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { _ = conn.Close() }()
					if err := c.PortForward(ctx, f.namespace, pod, uint32(remote), conn); err != nil && ctx.Err() == nil {
						mu.Lock()
						_, _ = fmt.Fprintf(a.stderr, "error: connection from %s to port %d: %s\n", conn.RemoteAddr(), remote, errText(err))
						mu.Unlock()
					}
				}()
			}
		}()
	}
	<-ctx.Done()
	for _, l := range listeners {
		_ = l.Close()
	}
	wg.Wait()
	listeners = nil
	return ctx.Err()
}

// errText is an error's message without the SDK's prefix of the call.
func errText(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Message != "" {
		return ce.Message
	}
	return err.Error()
}
