//go:build integration

package faults_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/internal/failpoint"
	"github.com/podsync/podsync/internal/localcri"
	"github.com/podsync/podsync/internal/localcri/localcritest"
)

// node is the state one test's podsyncd runs keep: the root and pod log
// directories and the socket, shared by the podsyncd processes the test
// starts one after the other (a crash, then a restart).
type node struct {
	t                          *testing.T
	rootDir, podLogDir, logDir string
	socket, config             string
	// metricsAddr is --metrics-address, if set before the first start.
	metricsAddr string
	runs        int
	cur         *podsyncd
	conn        *grpc.ClientConn
}

// newNode returns a node with fresh directories. When the test ends, the
// running podsyncd (if any) deletes every pod and stops; the logs of
// every run are shown if the test failed.
func newNode(t *testing.T) *node {
	t.Helper()
	n := &node{t: t, rootDir: t.TempDir(), podLogDir: t.TempDir(), logDir: t.TempDir()}
	// The socket directory must not be world-writable: t.TempDir is 0700.
	n.socket = filepath.Join(t.TempDir(), "podsync.sock")
	n.config = filepath.Join(t.TempDir(), "podsyncd.yaml")
	// The tests delete and re-create pods in bursts: no rate limit.
	if err := os.WriteFile(n.config, []byte("security:\n  rateLimit:\n    perSecond: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	n.conn, err = grpc.NewClient("unix://"+n.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Deferred, so that they run even if the cleanup fails the test:
		// a podsyncd left running would remove the next test's pods.
		defer func() { _ = n.conn.Close() }()
		defer func() {
			if t.Failed() {
				n.showLogs()
			}
		}()
		if d := n.cur; d != nil && !d.exited() {
			defer d.stop()
			n.deleteAll()
		}
	})
	return n
}

// client is a PodSyncService client over the node's socket (as uid 0, an
// admin), whichever podsyncd serves it.
func (n *node) client() podsyncv1.PodSyncServiceClient {
	return podsyncv1.NewPodSyncServiceClient(n.conn)
}

// podsyncd is one podsyncd child process.
type podsyncd struct {
	n     *node
	name  string
	armed string
	cmd   *exec.Cmd
	log   string
	done  chan struct{} // closed when the process has been reaped
	state *os.ProcessState
}

// start starts podsyncd with PODSYNC_FAILPOINTS=armed (none if empty). The
// previous podsyncd must have exited.
func (n *node) start(armed string) *podsyncd {
	n.t.Helper()
	if n.cur != nil && !n.cur.exited() {
		n.t.Fatalf("start podsyncd: %s is still running", n.cur.name)
	}
	n.runs++
	d := &podsyncd{n: n, armed: armed, done: make(chan struct{}),
		name: fmt.Sprintf("podsyncd run %d", n.runs), log: filepath.Join(n.logDir, fmt.Sprintf("podsyncd-%02d.log", n.runs))}
	if armed != "" {
		d.name += " (" + armed + ")"
	}
	logf, err := os.Create(d.log)
	if err != nil {
		n.t.Fatal(err)
	}
	args := []string{
		"--config=" + n.config,
		"--runtime-endpoint=" + inst.Endpoint(),
		"--listen=unix://" + n.socket,
		"--root-dir=" + n.rootDir,
		"--pod-log-dir=" + n.podLogDir,
		"--node-name=faults-" + inst.ID(),
		"--node-ip=127.0.0.1",
		"--shutdown-timeout=5s",
		// The pods' cgroups live under the run's own root, which TestMain
		// removes.
		"--cgroup-root=" + localcritest.CgroupRoot(inst),
	}
	if n.metricsAddr != "" {
		args = append(args, "--metrics-address="+n.metricsAddr)
	}
	d.cmd = exec.Command(podsyncdBin, args...)
	env := []string{"GORACE=atexit_sleep_ms=0"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, failpoint.EnvVar+"=") {
			env = append(env, kv)
		}
	}
	if armed != "" {
		env = append(env, failpoint.EnvVar+"="+armed)
	}
	d.cmd.Env = env
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		_ = logf.Close()
		n.t.Fatalf("start podsyncd: %v", err)
	}
	go func() {
		_ = d.cmd.Wait()
		d.state = d.cmd.ProcessState
		_ = logf.Close()
		close(d.done)
	}()
	n.cur = d
	return d
}

// startServing starts an unarmed podsyncd and waits until it serves.
func (n *node) startServing() *podsyncd {
	n.t.Helper()
	d := n.start("")
	if !d.awaitServing(time.Minute) {
		n.t.Fatalf("%s exited (%v) before serving", d.name, d.state)
	}
	return d
}

// exited reports whether the process has exited.
func (d *podsyncd) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// health returns podsync.v1.PodSyncService's health, or an error.
func (n *node) health(ctx context.Context) (healthpb.HealthCheckResponse_ServingStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(n.conn).Check(ctx,
		&healthpb.HealthCheckRequest{Service: podsyncv1.PodSyncService_ServiceDesc.ServiceName})
	return resp.GetStatus(), err
}

// awaitHealth waits until podsyncd reports want; it returns false if the
// process exits first, and fails the test after timeout.
func (d *podsyncd) awaitHealth(want healthpb.HealthCheckResponse_ServingStatus, timeout time.Duration) bool {
	d.n.t.Helper()
	// Not the test's context: cleanups wait too.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	for {
		st, err := d.n.health(ctx)
		if err == nil && st == want {
			return true
		}
		last = fmt.Sprintf("%v %v", st, err)
		select {
		case <-d.done:
			return false
		case <-ctx.Done():
			d.n.t.Fatalf("%s did not report %v within %s (last: %s)", d.name, want, timeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// awaitServing waits until podsyncd reports SERVING; false if it exited.
func (d *podsyncd) awaitServing(timeout time.Duration) bool {
	d.n.t.Helper()
	return d.awaitHealth(healthpb.HealthCheckResponse_SERVING, timeout)
}

// awaitExit waits up to timeout for the process to exit; false if it did
// not.
func (d *podsyncd) awaitExit(timeout time.Duration) bool {
	select {
	case <-d.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// killedBySIGKILL reports whether the process died of SIGKILL.
func (d *podsyncd) killedBySIGKILL() bool {
	ws, ok := d.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// kill9 kills podsyncd with SIGKILL and reaps it.
func (d *podsyncd) kill9() {
	d.n.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	if !d.awaitExit(30 * time.Second) {
		d.n.t.Fatalf("%s survived SIGKILL", d.name)
	}
}

// stop ends podsyncd with SIGTERM and checks that it exits 0; after 30 s
// it is killed.
func (d *podsyncd) stop() {
	if d.exited() {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if d.awaitExit(30 * time.Second) {
		if !d.state.Success() {
			d.n.t.Errorf("%s exited with %v after SIGTERM, want 0", d.name, d.state)
		}
		return
	}
	d.n.t.Errorf("%s ignored SIGTERM for 30s; killing it", d.name)
	_ = d.cmd.Process.Kill()
	<-d.done
}

// logText returns the process's log.
func (d *podsyncd) logText() string {
	b, err := os.ReadFile(d.log)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// fired reports whether the log says the failpoint name fired.
func (d *podsyncd) fired(name string) bool {
	return strings.Contains(d.logText(), "podsync failpoint "+name+" fired")
}

// showLogs logs the end of every run's log and keeps the logs in the
// repository's .tmp/logs.
func (n *node) showLogs() {
	if repo, err := localcri.RepoDir(); err == nil {
		keep := filepath.Join(repo, ".tmp", "logs", "faults-"+dnsName(n.t.Name(), 60)+"-"+time.Now().UTC().Format("20060102T150405"))
		if err := os.CopyFS(keep, os.DirFS(n.logDir)); err == nil {
			n.t.Logf("podsyncd logs kept in %s", keep)
		}
	}
	for i := 1; i <= n.runs; i++ {
		path := filepath.Join(n.logDir, fmt.Sprintf("podsyncd-%02d.log", i))
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 80 {
			lines = lines[len(lines)-80:]
		}
		n.t.Logf("podsyncd run %d log (last %d lines of %s):\n%s", i, len(lines), path, strings.Join(lines, "\n"))
	}
}

// freeAddr returns a free 127.0.0.1 TCP address for --metrics-address.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// goroutines scrapes go_goroutines from podsyncd's metrics.
func (n *node) goroutines(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.metricsAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no go_goroutines in /metrics")
}
