//go:build integration

package cli_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// runWeb runs the web example and waits until it is Ready.
func runWeb(ctx context.Context, t *testing.T, d *podsyncd) {
	t.Helper()
	dir, _ := examples(ctx, t)
	d.mustCtl(ctx, "run", "--wait-for", "ready", "--timeout", "2m", "-f", filepath.Join(dir, "web.yaml"))
}

// TestExec: podsyncctl exec prints the command's output, passes stdin
// with -i, keeps stderr apart, exits with the command's exit code and
// refuses a container that does not run; every session is in podsyncd's
// log with the identity and the command.
func TestExec(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	runWeb(ctx, t, d)

	r := d.ctl(ctx, "", "exec", "web", "--", "sh", "-c", "echo hi; exit 3")
	if r.code != 3 || r.stdout != "hi\n" {
		t.Errorf("exec web -- sh -c 'echo hi; exit 3' = %+v; want hi and exit code 3", r)
	}
	r = d.ctl(ctx, "data\n", "exec", "-i", "web", "--", "cat")
	if r.code != 0 || r.stdout != "data\n" {
		t.Errorf("echo data | exec -i web -- cat = %+v; want data", r)
	}
	r = d.ctl(ctx, "data\n", "exec", "web", "--", "cat")
	if r.code != 0 || r.stdout != "" {
		t.Errorf("exec web -- cat without -i = %+v; want no input and no output", r)
	}
	r = d.ctl(ctx, "", "exec", "web", "-c", "httpd", "--", "sh", "-c", "echo out; echo err >&2")
	if r.code != 0 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("exec with stderr = %+v; want out on stdout, err on stderr", r)
	}
	r = d.ctl(ctx, "", "exec", "web", "-c", "nosuch", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, `container "nosuch"`) {
		t.Errorf("exec in an unknown container = %+v; want exit 1 naming it", r)
	}

	// A container that does not run.
	job := `apiVersion: v1
kind: Pod
metadata: {name: done}
spec:
  restartPolicy: Never
  containers:
  - {name: app, image: registry.local/busybox:local, command: ["true"]}
`
	f := filepath.Join(t.TempDir(), "done.yaml")
	if err := os.WriteFile(f, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	d.mustCtl(ctx, "run", "--wait-for", "succeeded", "--timeout", "2m", "-f", f)
	r = d.ctl(ctx, "", "exec", "done", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "not running") {
		t.Errorf("exec in an exited container = %+v; want exit 1 saying it does not run", r)
	}

	log := d.LogText()
	for _, want := range []string{"session started", "session ended", "uid:0", `"command": ["sh", "-c", "echo hi; exit 3"]`, `"exit_code": 3`, `"pod_name": "web"`} {
		if !strings.Contains(log, want) {
			t.Errorf("podsyncd's log has no %q", want)
		}
	}
}

// TestExecMemory: a 50 MiB output streams through podsyncd to a slow
// reader with podsyncd's RSS growing by less than 10 MiB. podsyncd is
// built without the race detector here: its shadow memory multiplies what
// the heap churns (an 8–9 MiB growth under -race, about 1 MiB without).
func TestExecMemory(t *testing.T) {
	ctx := testContext(t)
	bin := filepath.Join(t.TempDir(), "podsyncd")
	if err := localcritest.BuildWithoutRace(bin, "./cmd/podsyncd"); err != nil {
		t.Fatal(err)
	}
	d := startPodsyncdBin(t, bin)
	runWeb(ctx, t, d)
	const size = 50 << 20
	rss := func() int64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.PID()))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				return kb << 10
			}
		}
		t.Fatal("no VmRSS")
		return 0
	}
	// Warm up the streaming path until the heap has reached the size
	// the garbage collector keeps for it, then measure from there:
	// what grows after that is what the stream holds.
	for range 2 {
		d.mustCtl(ctx, "exec", "web", "--", "sh", "-c", "head -c 16777216 /dev/zero")
	}
	base := rss()
	var peak atomic.Int64
	peak.Store(base)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if v := rss(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	cmd := exec.CommandContext(ctx, podsyncctlBin, "exec", "web", "--", "sh", "-c", fmt.Sprintf("head -c %d /dev/zero", size))
	cmd.Env = append(os.Environ(), "PODSYNC_ADDRESS="+d.address)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A slow reader: the output must wait for it, not pile up.
	n, _ := io.Copy(io.Discard, &slowReader{r: out, delay: time.Millisecond})
	err = cmd.Wait()
	close(stop)
	wg.Wait()
	if err != nil || n != size {
		// What the runtime's own client, crictl, reads of the same
		// command tells a runtime fault from podsyncd's.
		web := d.pod(ctx, "web")
		cid := strings.TrimPrefix(web.GetStatus().GetContainerStatuses()[0].GetContainerId(), "containerd://")
		args := append(strings.Fields(inst.CrictlHint()), "exec", cid, "sh", "-c", fmt.Sprintf("head -c %d /dev/zero", size))
		cc := exec.CommandContext(ctx, args[0], args[1:]...)
		if o, perr := cc.StdoutPipe(); perr == nil && cc.Start() == nil {
			m, _ := io.Copy(io.Discard, &slowReader{r: o, delay: time.Millisecond})
			t.Logf("crictl exec of the same command read %d bytes, %v", m, cc.Wait())
		}
		t.Fatalf("exec of %d bytes of output: read %d, %v", size, n, err)
	}
	if grew := peak.Load() - base; grew >= 10<<20 {
		t.Errorf("podsyncd's RSS grew by %d KiB while streaming 50 MiB; want < 10 MiB", grew>>10)
	} else {
		t.Logf("podsyncd's RSS grew by %d KiB while streaming 50 MiB", grew>>10)
	}
}

// TestExecTailAfterPause: a caller that stops reading for longer than a
// SPDY ping period just before the end of a large output still gets all
// of it, and the exit status after it. The runtime's streaming server
// closes its connection once the process has exited and it has handed
// the tail to the kernel; anything podsyncd then writes on that
// connection (client-go's keep-alive ping every 5 s) makes the runtime's
// kernel reset it, and the tail still buffered is lost without an error
// (kubernetes/kubernetes#124571). The caller's gRPC windows are kept
// small so that the tail is in the runtime connection's buffers, not in
// gRPC's, while the caller pauses.
func TestExecTailAfterPause(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	runWeb(ctx, t, d)
	conn, err := grpc.NewClient(d.address, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	const size, tail = 16 << 20, 4 << 20
	stream, err := podsyncv1.NewPodSyncServiceClient(conn).Exec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&podsyncv1.ExecRequest{Msg: &podsyncv1.ExecRequest_Start{Start: &podsyncv1.ExecStart{
		Namespace: "default", Name: "web", Command: []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/zero", size)}}}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var n int
	paused := false
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d of %d bytes: %v", n, size, err)
		}
		if e := m.GetExit(); e != nil {
			if n != size || e.GetExitCode() != 0 {
				t.Fatalf("exec of %d bytes of output, paused 6 s %d bytes before the end: read %d, exit code %d", size, tail, n, e.GetExitCode())
			}
			return
		}
		n += len(m.GetStdout())
		if !paused && n >= size-tail {
			paused = true
			time.Sleep(6 * time.Second)
		}
	}
}

// slowReader reads at most 32 KiB at a time, waiting delay before each
// read.
type slowReader struct {
	r     io.Reader
	delay time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.delay)
	return s.r.Read(p[:min(len(p), 32<<10)])
}

// TestExecTTY: in tmux, exec -it gives a shell on a terminal of the pane's
// size that follows a resize of the pane, and exit returns its code.
func TestExecTTY(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	runWeb(ctx, t, d)

	dir := t.TempDir()
	sock := filepath.Join(dir, "tmux.sock")
	codeFile := filepath.Join(dir, "code")
	tmux := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, "tmux", append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	script := fmt.Sprintf("PODSYNC_ADDRESS=%s %s exec -it web -- sh; echo $? > %s; sleep 600", d.address, podsyncctlBin, codeFile)
	tmux("new-session", "-d", "-s", "itest", "-x", "100", "-y", "30", script)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", sock, "kill-server").Run() })
	pane := func() string { return tmux("capture-pane", "-p", "-t", "itest") }
	wait := func(what string, cond func(string) bool) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var last string
		for {
			if last = pane(); cond(last) {
				return
			}
			select {
			case <-wctx.Done():
				t.Fatalf("%s: not seen; the pane shows:\n%s", what, last)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	// capture-pane trims the blank after the prompt.
	wait("a shell prompt", func(s string) bool { return strings.Contains(s, "/ #") })
	tmux("send-keys", "-t", "itest", "stty size", "Enter")
	wait("stty size of the pane", func(s string) bool { return strings.Contains(s, "30 100") })
	tmux("resize-window", "-t", "itest", "-x", "120", "-y", "40")
	// The resize reaches the container's terminal asynchronously, after
	// SIGWINCH, podsyncctl, podsyncd and the runtime, as with kubectl: a
	// stty run before it still prints the old size, so ask again.
	resized := func(s string) bool { return strings.Contains(s, "40 120") }
	for i := 0; i < 10 && !resized(pane()); i++ {
		tmux("send-keys", "-t", "itest", "stty size", "Enter")
		time.Sleep(time.Second)
	}
	wait("stty size after the resize", resized)
	tmux("send-keys", "-t", "itest", "exit 7", "Enter")
	eventually(ctx, t, "podsyncctl exits with the shell's code", func() bool {
		b, err := os.ReadFile(codeFile)
		return err == nil && strings.TrimSpace(string(b)) != ""
	})
	if b, _ := os.ReadFile(codeFile); strings.TrimSpace(string(b)) != "7" {
		t.Errorf("podsyncctl exec -it … sh; exit 7: exit code %q, want 7", strings.TrimSpace(string(b)))
	}
}

// TestPortForward: port-forward serves the pod's page on a local port,
// to many connections at once, on 127.0.0.1 only; a connection to a port
// nothing listens on fails alone.
func TestPortForward(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	runWeb(ctx, t, d)

	local := freeLocalPort(t)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(cctx, podsyncctlBin, "port-forward", "web", fmt.Sprintf("%d:8080", local), ":9")
	cmd.Env = append(os.Environ(), "PODSYNC_ADDRESS="+d.address)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var closedPort string
	for i := 0; i < 2 && sc.Scan(); i++ {
		line := sc.Text()
		if !strings.HasPrefix(line, "Forwarding from 127.0.0.1:") {
			t.Fatalf("port-forward printed %q; want Forwarding from 127.0.0.1:…", line)
		}
		if strings.HasSuffix(line, "-> 9") {
			closedPort = strings.Fields(line)[2]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	get := func() (string, error) {
		res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", local))
		if err != nil {
			return "", err
		}
		defer func() { _ = res.Body.Close() }()
		b, err := io.ReadAll(res.Body)
		return string(b), err
	}
	page, err := get()
	if err != nil || !strings.Contains(page, "Hello from podsync") {
		t.Fatalf("GET through port-forward: %q, %v", page, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := get(); err != nil || got != page {
				errs <- fmt.Errorf("got %d bytes, %w; want the whole page (%d bytes)", len(got), err, len(page))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent GET: %v", err)
	}

	// Nothing listens on port 9 in the pod: that connection fails and is
	// reported, the others go on.
	c, err := net.Dial("tcp", closedPort)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("read from a forward to a closed port: %d, %v; want the connection closed", n, err)
	}
	_ = c.Close()
	if got, err := get(); err != nil || got != page {
		t.Errorf("GET after a failed connection: %d bytes, %v", len(got), err)
	}
	eventually(ctx, t, "port-forward reports the failed connection", func() bool {
		return strings.Contains(stderr.String(), "to port 9")
	})
}

// freeLocalPort is a TCP port free on 127.0.0.1 just now.
func freeLocalPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer is a strings.Builder safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAttach: attach prints what the container's main process writes
// while attached, and an interrupt detaches (exit 0) leaving it running.
func TestAttach(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	manifest := `apiVersion: v1
kind: Pod
metadata: {name: ticker}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: registry.local/busybox:local
    command: ["sh", "-c", "trap 'exit 0' TERM; i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"]
`
	f := filepath.Join(t.TempDir(), "ticker.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	d.mustCtl(ctx, "run", "--wait-for", "running", "--timeout", "2m", "-f", f)

	cmd := exec.CommandContext(ctx, podsyncctlBin, "attach", "ticker")
	cmd.Env = append(os.Environ(), "PODSYNC_ADDRESS="+d.address)
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "attach prints the container's output", func() bool { return strings.Count(out.String(), "tick ") >= 3 })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("attach after an interrupt: %v (stderr %q); want exit 0, detached", err, errOut.String())
	}
	if r := d.ctl(ctx, "", "get", "ticker"); !hasRow(r.stdout, "default", "ticker", "1/1", "Running", "0") {
		t.Errorf("the container after detaching:\n%s", r.stdout)
	}
}
