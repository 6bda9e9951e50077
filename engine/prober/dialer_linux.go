package prober

import (
	"net"
	"syscall"
)

// probeDialer is the kubelet's probe.ProbeDialer: SO_LINGER with a
// one-second timeout makes Close reset the connection instead of leaving
// it in TIME_WAIT, so frequent probes do not exhaust the node's ports.
func probeDialer() *net.Dialer {
	return &net.Dialer{
		Control: func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) {
				// As the kubelet, a socket without the option still probes.
				_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
			})
		},
	}
}
