package prober

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	testingclock "k8s.io/utils/clock/testing"
	utilexec "k8s.io/utils/exec"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is when every test's fake clock starts.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// errExit1 is a command's exit with status 1, as cri-client reports it.
var errExit1 = utilexec.CodeExitError{Err: errors.New("command 'check' exited with 1: not ok"), Code: 1}

// fakeExec is an ExecRunner whose commands succeed or fail as the test
// says, by command name (the command's first word).
type fakeExec struct {
	mu sync.Mutex
	// errs holds the error each command returns; absent is success.
	errs map[string]error
	// block makes a command wait for its context to end.
	block map[string]bool
	// calls counts the calls by container ID and command name.
	calls   map[string]int
	stdout  []byte
	stderr  []byte
	lastCmd []string
	timeout time.Duration
}

var _ ExecRunner = (*fakeExec)(nil)

func newFakeExec() *fakeExec {
	return &fakeExec{errs: map[string]error{}, block: map[string]bool{}, calls: map[string]int{}}
}

func (f *fakeExec) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	f.mu.Lock()
	name := ""
	if len(cmd) > 0 {
		name = cmd[0]
	}
	f.calls[containerID+"/"+name]++
	f.lastCmd = cmd
	f.timeout = timeout
	err, block := f.errs[name], f.block[name]
	stdout, stderr := f.stdout, f.stderr
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}
	return stdout, stderr, err
}

// set makes command name return err from now on (nil: success).
func (f *fakeExec) set(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[name] = err
}

func (f *fakeExec) count(containerID, name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[containerID+"/"+name]
}

// harness is a Manager on a fake clock with a fakeExec runtime.
type harness struct {
	t    *testing.T
	clk  *testingclock.FakeClock
	exec *fakeExec
	m    *Manager
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, clk: testingclock.NewFakeClock(t0), exec: newFakeExec()}
	h.m = h.newManager(Options{})
	return h
}

// newManager returns a Manager on h's clock and runtime, stopped at the end
// of the test.
func (h *harness) newManager(opts Options) *Manager {
	opts.Clock = h.clk
	opts.Runtime = h.exec
	opts.Logger = zaptest.NewLogger(h.t)
	m := New(opts)
	h.t.Cleanup(m.Stop)
	return m
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle waits until n workers are alive and every one of them sleeps on
// the fake clock, so that all probes due have run and been recorded.
func (h *harness) settle(n int) {
	h.t.Helper()
	eventually(h.t, strconv.Itoa(n)+" sleeping workers", func() bool {
		return h.m.live.Load() == int64(n) && h.clk.Waiters() == n
	})
}

// step moves the clock by d and waits until n workers sleep again.
func (h *harness) step(d time.Duration, n int) {
	h.t.Helper()
	h.clk.Step(d)
	h.settle(n)
}

// update receives the next update, failing the test after 10 s.
func (h *harness) update() Update {
	h.t.Helper()
	select {
	case u := <-h.m.Updates():
		return u
	case <-time.After(10 * time.Second):
		h.t.Fatal("no update")
		return Update{}
	}
}

// noUpdate fails the test if an update is pending. Call it once the
// workers have settled.
func (h *harness) noUpdate() {
	h.t.Helper()
	select {
	case u := <-h.m.Updates():
		h.t.Fatalf("unexpected update %+v", u)
	default:
	}
}

// wantUpdate receives the next update and checks it.
func (h *harness) wantUpdate(id string, typ Type, r Result) {
	h.t.Helper()
	u := h.update()
	if u.ContainerID != id || u.Type != typ || u.Result != r {
		h.t.Fatalf("update = {%s %s %s}, want {%s %s %s}", u.ContainerID, u.Type, u.Result, id, typ, r)
	}
}

// result returns the current result of the probe of type typ of id.
func (h *harness) result(uid types.UID, typ Type, id string) (Result, bool) {
	res := h.m.Results(uid)
	r, ok := (*resultsOf(&res, typ))[id]
	return r, ok
}

func (h *harness) wantResult(uid types.UID, typ Type, id string, want Result) {
	h.t.Helper()
	got, ok := h.result(uid, typ, id)
	if !ok || got != want {
		h.t.Fatalf("%s result of %s = %s (present %t), want %s", typ, id, got, ok, want)
	}
}

// execProbe returns an exec probe running cmd with period 10 s and the
// API's defaults otherwise.
func execProbe(cmd string) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}},
		PeriodSeconds:    10,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
}

// withThresholds sets a probe's thresholds.
func withThresholds(p *corev1.Probe, success, failure int32) *corev1.Probe {
	p.SuccessThreshold, p.FailureThreshold = success, failure
	return p
}

// newPod returns a pod with the given containers.
func newPod(uid string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod-" + uid, UID: types.UID(uid)},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

// running returns a running instance started at t0.
func running(name, id string) RunningContainer {
	return RunningContainer{Name: name, ID: id, StartedAt: t0, PodIP: "127.0.0.1"}
}

// listen opens a TCP listener on 127.0.0.1 that accepts and closes
// connections until the test ends, and returns its port.
func listen(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// closedPort returns a port on 127.0.0.1 nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// loopbackOnly is a DialContext that refuses any address but 127.0.0.1 and
// records what it dialled.
type loopbackOnly struct {
	mu     sync.Mutex
	dialed []string
}

func (l *loopbackOnly) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	l.mu.Lock()
	l.dialed = append(l.dialed, address)
	l.mu.Unlock()
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if host != "127.0.0.1" {
		return nil, errors.New("test dialer: only 127.0.0.1 may be dialled, not " + address)
	}
	return probeDialer().DialContext(ctx, network, address)
}

func (l *loopbackOnly) addresses() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.dialed...)
}

func portInt(p int) intstr.IntOrString { return intstr.FromInt32(int32(p)) }
