package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	crifake "k8s.io/cri-client/pkg/fake"

	"github.com/podsync/podsync/internal/daemon"
)

// TestRunMetrics runs podsyncd on cri-client's fake CRI server and scrapes
// --metrics-address: the engine's families are served beside the gRPC
// server's, CRI calls are timed through the decorator, and cri-client's
// klog lines arrive as podsyncd's JSON lines of the "cri" logger.
func TestRunMetrics(t *testing.T) {
	dir := t.TempDir()
	endpoint := "unix://" + filepath.Join(dir, "cri.sock")
	cri := crifake.NewFakeRemoteRuntime()
	if err := cri.Start(endpoint); err != nil {
		t.Fatal(err)
	}
	defer cri.Stop()

	args := append([]string{
		"--runtime-endpoint=" + endpoint,
		"--listen=unix://" + filepath.Join(dir, "podsync.sock"),
		"--root-dir=" + filepath.Join(dir, "root"),
		"--pod-log-dir=" + filepath.Join(dir, "logs"),
		"--metrics-address=127.0.0.1:0",
		"--shutdown-timeout=5s",
		"--log-level=debug",
	}, base...)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- daemon.Run(ctx, args, &stdout, &stderr) }()
	defer func() {
		cancel()
		select {
		case code := <-done:
			if code != daemon.ExitOK {
				t.Errorf("exit %d; stderr:\n%s", code, stderr.String())
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return within 10s of cancel")
		}
	}()

	// Wait for the node: podsync_pods is served while one runs.
	deadline := time.Now().Add(10 * time.Second)
	var addr, body string
	for {
		if addr == "" && strings.Contains(stderr.String(), `"serving metrics"`) {
			addr = metricsAddress(t, &stderr)
		}
		if addr != "" {
			body = scrape(t, ctx, addr)
			if strings.Contains(body, `podsync_pods{phase="Running"}`) &&
				strings.Contains(body, `podsync_cri_request_duration_seconds_count{code="OK",method="ListContainers"}`) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node metrics within 10s; metrics:\n%s\nstderr:\n%s", body, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{
		`podsync_pods{phase="Running"} 0`,
		`podsync_pods{phase="Pending"} 0`,
		`podsync_backoffs_active 0`,
		`podsync_sync_pass_duration_seconds_count{outcome="success"} 0`,
		`podsync_cri_request_duration_seconds_count{code="OK",method="ListPodSandbox"}`,
		"grpc_server_handled_total",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}

	// cri-client logs the fake's closed event stream through klog.
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "container events stream is closed") {
		if time.Now().After(deadline) {
			t.Fatalf("no klog line in the log:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Level, Logger, Msg, Error string
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("not a JSON log line: %s", sc.Text())
			continue
		}
		if line.Msg == "container events stream is closed" &&
			(line.Logger != "cri" || line.Level != "debug" || !strings.Contains(line.Error, "EOF")) {
			t.Errorf("klog line %s: want logger cri, level debug and the error", sc.Text())
		}
	}
}

func scrape(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer func() {
		_ = resp.Body.Close()
		http.DefaultClient.CloseIdleConnections()
	}()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %s, %v", resp.Status, err)
	}
	return string(b)
}
