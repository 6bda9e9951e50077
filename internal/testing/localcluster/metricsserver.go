package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// MetricsResolution is how often metrics-server scrapes the nodes'
// /metrics/resource: its least (10 s) would need a shorter kubelet
// request timeout; 15 s is kubeadm clusters' usual setting. kubectl top
// node answers after two scrapes; a pod's container that started 10 to
// 15 s before a scrape, after one.
const MetricsResolution = 15 * time.Second

// metricsServerObjects are the API objects that make metrics-server, a
// process on the host at ADDR:PORT, the Metrics API (v1beta1.metrics.k8s.io)
// as its usual manifest does: a Service without selector and its
// Endpoints (the API server dials an APIService's endpoints:
// --enable-aggregator-routing), and the APIService. Its serving
// certificate is self-signed, as metrics-server makes it without one.
const metricsServerObjects = `apiVersion: v1
kind: Service
metadata: {name: metrics-server, namespace: kube-system, labels: {k8s-app: metrics-server}}
spec:
  ports: [{name: https, port: PORT, protocol: TCP, targetPort: PORT}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: metrics-server, namespace: kube-system, labels: {k8s-app: metrics-server}}
subsets:
- addresses: [{ip: ADDR}]
  ports: [{name: https, port: PORT, protocol: TCP}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io, labels: {k8s-app: metrics-server}}
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  insecureSkipTLSVerify: true
  service: {name: metrics-server, namespace: kube-system, port: PORT}
`

// startMetricsServer runs metrics-server (bin) on the host, scraping
// every node's kubelet API as upstream's manifest has it configured
// (--kubelet-insecure-tls, the InternalIP, the port the Node reports) with
// the admin's credentials, registers it as the Metrics API and waits
// until the API server says it is available.
func (c *Cluster) startMetricsServer(ctx context.Context, bin string) error {
	addr, err := hostAddress()
	if err != nil {
		return err
	}
	ports, err := localcri.FreePorts(1)
	if err != nil {
		return err
	}
	port := strconv.Itoa(ports[0])
	certs := filepath.Join(c.opts.Dir, "metrics-server")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return err
	}
	kc := c.Kube.Kubeconfig
	if c.MetricsServer, err = StartProcess(c.opts.Dir, "metrics-server", bin,
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address="+addr.String(), "--secure-port="+port, "--cert-dir="+certs,
		"--kubelet-insecure-tls", "--kubelet-preferred-address-types=InternalIP", "--kubelet-use-node-status-port",
		"--metric-resolution="+MetricsResolution.String(), "--v=2"); err != nil {
		return err
	}
	// Registered once it listens: the API server's first availability
	// check would otherwise fail, and the next come only later.
	hostPort := net.JoinHostPort(addr.String(), port)
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", hostPort)
		if err == nil {
			_ = conn.Close()
			break
		}
		select {
		case <-c.MetricsServer.Exited():
			return fmt.Errorf("metrics-server exited before it listened on %s; its log, %s, ends:\n%s", hostPort, c.MetricsServer.Log, tail(c.MetricsServer.Log))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("metrics-server does not listen on %s within a minute; its log, %s, ends:\n%s", hostPort, c.MetricsServer.Log, tail(c.MetricsServer.Log))
		}
	}
	manifest := strings.NewReplacer("ADDR", addr.String(), "PORT", port).Replace(metricsServerObjects)
	f := filepath.Join(certs, "metrics-server.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		return err
	}
	if out, err := c.Kubectl(ctx, "apply", "-f", f); err != nil {
		return fmt.Errorf("register metrics-server: %w\n%s", err, out)
	}
	if out, err := c.Kubectl(ctx, "wait", "--for=condition=Available", "apiservice/v1beta1.metrics.k8s.io", "--timeout=60s"); err != nil {
		return fmt.Errorf("the Metrics API is not available: %w\n%s\nmetrics-server's log, %s, ends:\n%s", err, out, c.MetricsServer.Log, tail(c.MetricsServer.Log))
	}
	return nil
}

// hostAddress is an address of the host the API server reaches
// metrics-server at: an Endpoints address may not be a loopback one, so
// the first global IPv4 address of an interface that is up.
func hostAddress() (netip.Addr, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("list network interfaces: %w", err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			if ip := p.Addr(); ip.Is4() && ip.IsGlobalUnicast() {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, errors.New("metrics-server: the host has no global IPv4 address for the API server to reach it at (an Endpoints address may not be loopback)")
}

// tail returns the last 2 KiB of a file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}
