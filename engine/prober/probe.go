package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/podsync/podsync/engine/criconfig/expansion"
)

// maxProbeRetries is how many times a probe that errors is run before the
// error is returned (the kubelet's maxProbeRetries).
const maxProbeRetries = 3

// maxOutputBytes bounds the output kept of an exec command and the body
// read of an HTTP response (10 KiB, as the kubelet).
const maxOutputBytes = 10 << 10

// outcome is what one run of a probe handler found (pkg/probe's Result).
type outcome int

const (
	outcomeUnknown outcome = iota
	outcomeSuccess
	// outcomeWarning is a success with something to report: an HTTP
	// redirect to another host, which is not followed.
	outcomeWarning
	outcomeFailure
)

// Errors of a probe handler. A probe error is not a result: the worker
// throws it away and tries again next period.
var (
	errNoHandler = errors.New("probe has no handler")
	errNoRuntime = errors.New("no runtime to run exec probes")
	errNoHost    = errors.New("no address to probe: the pod has no IP")
)

// target is the container instance a probe runs against.
type target struct {
	container   *corev1.Container
	containerID string
	// host is the address to dial when the probe names none; empty if
	// none is known.
	host string
}

// prober runs the handlers of probes.
type prober struct {
	runtime       ExecRunner
	isExecTimeout func(error) bool
	dial          func(ctx context.Context, network, address string) (net.Conn, error)
	transport     *http.Transport
}

// probe runs spec's handler against t. A handler error is retried, up to
// maxProbeRetries runs, unless ctx ended or the container is not found
// (it is gone; the next Sync stops the worker), and then returned, as the
// kubelet's runProbeWithRetries.
func (p *prober) probe(ctx context.Context, spec *corev1.Probe, t target) (outcome, string, error) {
	var (
		o   outcome
		out string
		err error
	)
	for range maxProbeRetries {
		o, out, err = p.run(ctx, spec, t)
		if err == nil || ctx.Err() != nil || crierrors.IsNotFound(err) {
			break
		}
	}
	return o, out, err
}

// run runs spec's handler once.
func (p *prober) run(ctx context.Context, spec *corev1.Probe, t target) (outcome, string, error) {
	timeout := seconds(spec.TimeoutSeconds, defaultTimeoutSeconds)
	switch {
	case spec.Exec != nil:
		return p.execProbe(ctx, spec.Exec, t, timeout)
	case spec.HTTPGet != nil:
		return p.httpProbe(ctx, spec.HTTPGet, t, timeout)
	case spec.TCPSocket != nil:
		return p.tcpProbe(ctx, spec.TCPSocket, t, timeout)
	case spec.GRPC != nil:
		return p.grpcProbe(ctx, spec.GRPC, t, timeout)
	default:
		return outcomeUnknown, "", errNoHandler
	}
}

// resolvePort returns the port param names: a number, or the name of one
// of the container's ports, or a number written as a string (the
// kubelet's probe.ResolveContainerPort).
func resolvePort(param intstr.IntOrString, c *corev1.Container) (int, error) {
	var port int
	switch param.Type {
	case intstr.Int:
		port = param.IntValue()
	case intstr.String:
		var ok bool
		if port, ok = portByName(c, param.StrVal); !ok {
			n, err := strconv.Atoi(param.StrVal)
			if err != nil {
				return 0, fmt.Errorf("port %q not found in container %q", param.StrVal, c.Name)
			}
			port = n
		}
	default:
		return 0, fmt.Errorf("port %v has no type", param)
	}
	if port <= 0 || port >= 65536 {
		return 0, fmt.Errorf("invalid port number %d", port)
	}
	return port, nil
}

func portByName(c *corev1.Container, name string) (int, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort), true
		}
	}
	return 0, false
}

// hostPort joins host and port, or fails when there is no host: an empty
// host would dial the node itself.
func hostPort(host string, port int) (string, error) {
	if host == "" {
		return "", errNoHost
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// expandCommand expands $(VAR) references in an exec probe's command with
// the container's env values, as the kubelet's
// ExpandContainerCommandOnlyStatic: only the literal values of env (one
// set from a source counts as empty), no envFrom, no downward API.
func expandCommand(cmd []string, env []corev1.EnvVar) []string {
	if len(cmd) == 0 {
		return nil
	}
	vars := make(map[string]string, len(env))
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	out := make([]string, len(cmd))
	for i, arg := range cmd {
		out[i] = expansion.Expand(arg, vars)
	}
	return out
}
