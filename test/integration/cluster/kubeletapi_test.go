//go:build integration

package cluster_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/podsync/podsync/internal/testing/localcluster"
	"github.com/podsync/podsync/internal/testing/localkube"
)

// portForwardGet runs kubectl port-forward to the pod's port and returns
// the body of GET / through it.
func portForwardGet(t *testing.T, c *localkube.Cluster, pod string, port int) string {
	t.Helper()
	local := freePort(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(kubeBin, "kubectl"), "--kubeconfig", c.Kubeconfig,
		"port-forward", "pod/"+pod, fmt.Sprintf("%d:%d", local, port))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	var body string
	eventually(t, 30*time.Second, "GET through kubectl port-forward", func() (bool, string) {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/", local))
		if err != nil {
			return false, fmt.Sprintf("%v; kubectl: %s", err, out.String())
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err == nil && resp.StatusCode == http.StatusOK, fmt.Sprintf("%s %q %v", resp.Status, body, err)
	})
	return body
}

// lockedBuffer is a buffer a command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// kubeletGet GETs path from a node's kubelet API (podsync-vk's) with
// cfg's credentials (localcluster.KubeletConfig).
func kubeletGet(t *testing.T, cfg *rest.Config, port int, path string) (int, string) {
	t.Helper()
	c := localcluster.KubeletConfig(cfg, port)
	tr, err := rest.TransportFor(c)
	if err != nil {
		t.Fatal(err)
	}
	defer utilnet.CloseIdleConnectionsFor(tr)
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	resp, err := hc.Get(c.Host + path)
	if err != nil {
		t.Fatalf("GET %s from the kubelet API: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
