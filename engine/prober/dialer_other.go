//go:build !linux

package prober

import "net"

// probeDialer is a plain net.Dialer where SO_LINGER is not set.
func probeDialer() *net.Dialer {
	return &net.Dialer{}
}
