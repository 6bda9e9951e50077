package cli

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/runpods"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/server"
)

// testImage is held by every fake runtime.
const testImage = "registry.local/busybox:local"

// fixedNow is the clock of the printers in tests.
var fixedNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// result is one run of podsyncctl.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs podsyncctl in-process with args, stdin and an environment
// of only env (no HOME: no config file), printing times against fixedNow.
func runCLI(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return runCLIContext(ctx, env, stdin, args...)
}

func runCLIContext(ctx context.Context, env map[string]string, stdin string, args ...string) result {
	var out, errOut bytes.Buffer
	a := &app{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut,
		getenv: func(k string) string { return env[k] }, now: func() time.Time { return fixedNow }}
	code := a.main(ctx, args)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// podsyncd is an in-process podsyncd: the real server (server.New, with
// its interceptors and authorization) and service on an engine.Node over
// a FakeRuntime, on a unix socket.
type podsyncd struct {
	rt      *enginetest.FakeRuntime
	address string
}

// env is the environment that points podsyncctl at it.
func (d *podsyncd) env() map[string]string { return map[string]string{"PODSYNC_ADDRESS": d.address} }

// run runs podsyncctl against d.
func (d *podsyncd) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runCLI(t, d.env(), stdin, args...)
}

func startPodsyncd(t *testing.T) *podsyncd { return startPodsyncdOn(t, false) }

// startPodsyncdOn starts podsyncd on a unix socket, or with tcp on a
// plaintext loopback TCP listener (--insecure-listen-loopback) whose
// anonymous callers are admins.
func startPodsyncdOn(t *testing.T, tcp bool) *podsyncd {
	t.Helper()
	rt := enginetest.NewRuntime(enginetest.WithImages(testImage))
	st, err := store.Open(filepath.Join(t.TempDir(), "podsync.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := criconfig.Options{RootDir: t.TempDir(), PodLogDir: t.TempDir(), NodeIPs: []string{"192.0.2.10"}}
	node, err := engine.NewNode(engine.NodeOptions{Runtime: rt, Images: rt, Store: st, Logger: zap.NewNop(), Config: cfg,
		RelistPeriod: time.Hour, EventedRelistPeriod: time.Hour,
		LogRotation: engine.LogRotation{Period: time.Hour}, GC: engine.GCPolicy{Period: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- node.Run(runCtx) }()

	svc := server.NewService(server.ServiceOptions{Node: node, NodeName: "node-1", Logger: zap.NewNop(),
		RunPods: runpods.Options{PodLogDir: cfg.PodLogDir}})
	opts := server.Options{Service: svc, Logger: zap.NewNop(),
		Roles: server.Roles{Admin: []string{"uid:" + strconv.Itoa(os.Getuid())}}}
	if tcp {
		opts.InsecureLoopback = true
		opts.Roles.Admin = append(opts.Roles.Admin, server.Anonymous)
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	// A short path: unix socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("", "podsyncctl")
	if err != nil {
		t.Fatal(err)
	}
	var l net.Listener
	address := ""
	if tcp {
		l, err = net.Listen("tcp", "127.0.0.1:0")
		address = "tcp://" + l.Addr().String()
	} else {
		sock := filepath.Join(dir, "s.sock")
		l, err = net.Listen("unix", sock)
		address = "unix://" + sock
	}
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		stop()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
		_ = os.RemoveAll(dir)
	})
	return &podsyncd{rt: rt, address: address}
}
