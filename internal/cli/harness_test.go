package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/internal/testing/testdaemon"
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

// podsyncd is an in-process podsyncd (internal/testing/testdaemon): the real
// server (server.New, with its interceptors and authorization) and
// service on an engine.Node over a FakeRuntime, on a unix socket.
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
// anonymous callers are admins. It stops with the test.
func startPodsyncdOn(t *testing.T, tcp bool) *podsyncd {
	t.Helper()
	return startPodsyncdWith(t, tcp, testdaemon.Options{})
}

// startPodsyncdWith is startPodsyncdOn with further options (admission
// with Allocatable and Policy).
func startPodsyncdWith(t *testing.T, tcp bool, o testdaemon.Options) *podsyncd {
	t.Helper()
	o.Images = []string{testImage}
	if tcp {
		o.Transport = testdaemon.TCP
		o.Server.Roles = server.Roles{Admin: []string{testdaemon.Self(), server.Anonymous}}
	}
	d := testdaemon.New(t, o)
	address := d.Target
	if tcp {
		address = "tcp://" + d.Addr
	}
	return &podsyncd{rt: d.Runtime, address: address}
}
