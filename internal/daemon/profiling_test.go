package daemon_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podsync/podsync/internal/daemon"
)

func TestEnableProfilingNeedsMetricsAddress(t *testing.T) {
	args := append([]string{"--enable-profiling"}, base...)
	_, err := daemon.LoadConfig(t.Context(), args)
	if err == nil || !strings.Contains(err.Error(), "--enable-profiling") {
		t.Fatalf("LoadConfig(--enable-profiling without --metrics-address) = %v, want an error naming the flag", err)
	}
}

// TestProfilingEndpoint checks that --enable-profiling serves
// net/http/pprof beside /metrics, and that without it nothing is served
// under /debug/pprof/.
func TestProfilingEndpoint(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		dir := t.TempDir()
		args := append([]string{
			"--runtime-endpoint=unix://" + filepath.Join(dir, "containerd.sock"),
			"--listen=unix://" + filepath.Join(dir, "podsync.sock"),
			"--root-dir=" + filepath.Join(dir, "root"),
			"--pod-log-dir=" + filepath.Join(dir, "logs"),
			"--metrics-address=127.0.0.1:0",
			"--shutdown-timeout=5s",
		}, base...)
		if enabled {
			args = append(args, "--enable-profiling")
		}
		ctx, cancel := context.WithCancel(t.Context())
		var stdout, stderr syncBuffer
		done := make(chan int, 1)
		go func() { done <- daemon.Run(ctx, args, &stdout, &stderr) }()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(stderr.String(), `"serving metrics"`) {
			if time.Now().After(deadline) {
				cancel()
				<-done
				t.Fatalf("no metrics server; stderr:\n%s", stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		addr := metricsAddress(t, &stderr)
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+addr+"/debug/pprof/cmdline", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		rcancel()
		if err != nil {
			t.Fatalf("pprof: %v", err)
		}
		_ = resp.Body.Close()
		http.DefaultClient.CloseIdleConnections()
		want := http.StatusNotFound
		if enabled {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("enable-profiling=%t: GET /debug/pprof/cmdline: %s, want %d", enabled, resp.Status, want)
		}
		cancel()
		if code := <-done; code != daemon.ExitOK {
			t.Errorf("exit %d; stderr:\n%s", code, stderr.String())
		}
	}
}

// TestMetricsAllowRemote: a non-loopback --metrics-address is refused
// unless --metrics-allow-remote says so (the refusals are rows of
// TestRunUsageErrors).
func TestMetricsAllowRemote(t *testing.T) {
	args := append([]string{"--metrics-address=0.0.0.0:9090", "--metrics-allow-remote"}, base...)
	c, err := daemon.LoadConfig(t.Context(), args)
	if err != nil || !c.MetricsAllowRemote {
		t.Fatalf("LoadConfig(--metrics-allow-remote) = %+v, %v; want it accepted", c.MetricsAllowRemote, err)
	}
}
