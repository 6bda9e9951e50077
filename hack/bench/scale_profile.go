package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podsync/podsync/internal/testing/localcluster"
)

// agentProfileWindow is how long podsync-vk's CPU is profiled from the
// first Deployment's creation (-profile): the pods' creation at full
// rate, which every node count reaches and keeps for longer (25 nodes
// take about 39 s), and long enough for a few seconds of samples (10 s
// gave under a second of CPU at 25 nodes: too coarse to rank a 5 %).
const agentProfileWindow = 30 * time.Second

// profileAgent writes a CPU profile of podsync-vk, taken for d, to a new
// file of dir named after what. It asks the kubelet API of the node on
// port (/debug/pprof/profile: Go's profiles of the whole process, every
// node it serves) with the admin's certificate from kubeconfig,
// authorised as nodes/proxy.
func profileAgent(ctx context.Context, kubeconfig string, port int, d time.Duration, dir, what string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", fmt.Errorf("admin kubeconfig: %w", err)
	}
	c := localcluster.KubeletConfig(cfg, port)
	tr, err := rest.TransportFor(c)
	if err != nil {
		return "", err
	}
	hc := &http.Client{Transport: tr, Timeout: d + 30*time.Second}
	defer hc.CloseIdleConnections()
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", c.Host, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("profile podsync-vk: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return "", fmt.Errorf("profile podsync-vk: %s: %s", resp.Status, b)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "podsync-vk-"+what+"-*.pprof")
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("profile podsync-vk: %w", err)
	}
	return filepath.Clean(f.Name()), f.Close()
}
