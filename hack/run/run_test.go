package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestToolHints: the hints name grpcurl and crictl only when they are in
// .tmp/bin.
func TestToolHints(t *testing.T) {
	bin := t.TempDir()
	if got := toolHints(bin, "/s.sock", "/x/crictl --config /c.yaml"); got != "" {
		t.Errorf("without the tools: %q, want no hint", got)
	}
	for _, tool := range []string{"grpcurl", "crictl"} {
		if err := os.WriteFile(filepath.Join(bin, tool), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := "\n  grpcurl -unix -plaintext /s.sock list podsync.v1.PodSyncService\n" +
		"  grpcurl -unix -plaintext -d '{\"name\": \"web\"}' /s.sock podsync.v1.PodSyncService/GetPod\n" +
		"  /x/crictl --config /c.yaml pods\n"
	if got := toolHints(bin, "/s.sock", "/x/crictl --config /c.yaml"); got != want {
		t.Errorf("with both tools: %q, want %q", got, want)
	}
	if err := os.Remove(filepath.Join(bin, "grpcurl")); err != nil {
		t.Fatal(err)
	}
	if got, want := toolHints(bin, "/s.sock", "crictl --config /c.yaml"), "\n  crictl --config /c.yaml pods\n"; got != want {
		t.Errorf("with crictl only: %q, want %q", got, want)
	}
}

// TestRemoveAllButLogs: a clean run leaves its logs, and nothing that
// makes the next run take it for one that did not finish.
func TestRemoveAllButLogs(t *testing.T) {
	r := &runner{dir: t.TempDir()}
	for _, f := range []string{"podsyncd.log", "state", "podsync.sock", "root/pods/x", "pods/default_web/app/0.log"} {
		p := filepath.Join(r.dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.removeAllButLogs(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if !slices.Equal(left, []string{"podsyncd.log"}) {
		t.Errorf("left %v, want only podsyncd.log", left)
	}
}

// TestProgressLogger: localcri's slow steps show as the run's lines, its
// "ready" does not (the run says it itself), its debug entries neither.
func TestProgressLogger(t *testing.T) {
	var out bytes.Buffer
	r := &runner{out: &out}
	log := r.progressLogger()
	log.Info("building containerd from the go module proxy (once: 5-10 minutes on 2 cores)", zap.String("gobin", "/x"))
	log.Debug("noise")
	log.Info("containerd instance ready", zap.String("id", "abc"))
	if want := "==>   building containerd from the go module proxy (once: 5-10 minutes on 2 cores)\n"; out.String() != want {
		t.Errorf("progress = %q, want %q", out.String(), want)
	}
}
