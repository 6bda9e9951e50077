package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// apiService makes the kubernetes Service (default/kubernetes, the
// address in-cluster clients dial: KUBERNETES_SERVICE_HOST) reach the API
// server from every node's pods, as kube-proxy does on a kubelet's node:
// a DNAT of the Service's address, for packets coming from the node's pod
// bridge, to a TCP relay on the bridge's gateway, which relays to the API
// server on 127.0.0.1. TLS passes through untouched: the API server's
// certificate names the Service's address. It adds nothing to the host's
// network but a rule per node, tagged with the relay's address and
// removed by close.
type apiService struct {
	log *zap.Logger
	// rules are the iptables arguments of each rule added, for close.
	rules     [][]string
	listeners []net.Listener
	wg        sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// track adds c to the connections close ends; false once closed.
func (s *apiService) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = true
	return true
}

func (s *apiService) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// startAPIService relays serviceIP:servicePort from each bridge (with its
// gateway) to the API server at upstream.
func startAPIService(ctx context.Context, log *zap.Logger, serviceIP netip.Addr, servicePort int, upstream string, bridges map[string]netip.Addr) (_ *apiService, err error) {
	s := &apiService{log: log, conns: map[net.Conn]bool{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close())
		}
	}()
	for bridge, gw := range bridges {
		l, err := listenFreebind(ctx, net.JoinHostPort(gw.String(), "0"))
		if err != nil {
			return nil, fmt.Errorf("relay for the kubernetes Service on %s: %w", gw, err)
		}
		s.listeners = append(s.listeners, l)
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.relay(l, upstream) }()
		_, port, _ := net.SplitHostPort(l.Addr().String())
		rule := []string{"-t", "nat", "PREROUTING", "-i", bridge, "-d", serviceIP.String() + "/32", "-p", "tcp",
			"--dport", strconv.Itoa(servicePort), "-m", "comment", "--comment", "localcluster kubernetes Service",
			"-j", "DNAT", "--to-destination", net.JoinHostPort(gw.String(), port)}
		if err := iptables(ctx, "-A", rule); err != nil {
			return nil, err
		}
		s.rules = append(s.rules, rule)
	}
	return s, nil
}

// listenFreebind listens on addr even before the address exists on the
// host: a bridge gets its gateway address with its first pod.
func listenFreebind(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1) })
		return errors.Join(err, serr)
	}}
	return lc.Listen(ctx, "tcp4", addr)
}

// relay copies each connection accepted on l to and from upstream until l
// is closed.
func (s *apiService) relay(l net.Listener, upstream string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { _ = c.Close() }()
			if !s.track(c) {
				return
			}
			defer s.untrack(c)
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				s.log.Warn("relay to the API server", zap.Error(err))
				return
			}
			defer func() { _ = u.Close() }()
			if !s.track(u) {
				return
			}
			defer s.untrack(u)
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(u, c); _ = u.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, u); _ = c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

// close removes the rules and stops the relays.
func (s *apiService) close() error {
	if s == nil {
		return nil
	}
	var errs []error
	for _, r := range s.rules {
		errs = append(errs, iptables(context.Background(), "-D", r))
	}
	for _, l := range s.listeners {
		_ = l.Close()
	}
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return errors.Join(errs...)
}

// iptables runs iptables with op (-A, -D) on the chain of rule (its
// third argument, after "-t table").
func iptables(ctx context.Context, op string, rule []string) error {
	args := append([]string{"-w", rule[0], rule[1], op}, rule[2:]...)
	out, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
