package prober

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// tcpProbe opens a TCP connection to the probe's host (the pod's address
// by default) and port, and closes it: a connection is success, any error
// (refused, unreachable, timed out) is failure (the kubelet's DoTCPProbe).
func (p *prober) tcpProbe(ctx context.Context, action *corev1.TCPSocketAction, t target, timeout time.Duration) (outcome, string, error) {
	port, err := resolvePort(action.Port, t.container)
	if err != nil {
		return outcomeUnknown, "", err
	}
	host := action.Host
	if host == "" {
		host = t.host
	}
	addr, err := hostPort(host, port)
	if err != nil {
		return outcomeUnknown, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return outcomeFailure, err.Error(), nil
	}
	// The connection has done its job; an error closing it says nothing
	// about the container.
	_ = conn.Close()
	return outcomeSuccess, "", nil
}
