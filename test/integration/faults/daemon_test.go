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
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
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
	// inits is every init container instance seen during the test.
	inits *initHistory
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
	n.inits = watchInits(t)
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
		// After podsyncd has stopped.
		defer removeLeftovers(t)
		if d := n.cur; d != nil && !d.Exited() {
			defer d.Stop()
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

// podsyncd is one podsyncd child process of the node
// (localcritest.Podsyncd).
type podsyncd struct {
	*localcritest.Podsyncd
	n *node
}

// start starts podsyncd with PODSYNC_FAILPOINTS=armed (none if empty, even
// if the test's environment arms one). The previous podsyncd must have
// exited.
func (n *node) start(armed string) *podsyncd {
	n.t.Helper()
	if n.cur != nil && !n.cur.Exited() {
		n.t.Fatalf("start podsyncd: %s is still running", n.cur.Name())
	}
	n.runs++
	o := localcritest.PodsyncdOptions{
		Bin: podsyncdBin, Instance: inst, Socket: n.socket,
		RootDir: n.rootDir, PodLogDir: n.podLogDir,
		NodeName: "faults-" + inst.ID(), Config: n.config,
		Unset: []string{failpoint.EnvVar},
		Log:   filepath.Join(n.logDir, fmt.Sprintf("podsyncd-%02d.log", n.runs)),
		Name:  fmt.Sprintf("podsyncd run %d", n.runs),
	}
	if n.metricsAddr != "" {
		o.Args = append(o.Args, "--metrics-address="+n.metricsAddr)
	}
	if armed != "" {
		o.Env = []string{failpoint.EnvVar + "=" + armed}
		o.Name += " (" + armed + ")"
	}
	d := &podsyncd{Podsyncd: localcritest.StartPodsyncd(n.t, o), n: n}
	n.cur = d
	return d
}

// startServing starts an unarmed podsyncd and waits until it serves.
func (n *node) startServing() *podsyncd {
	n.t.Helper()
	d := n.start("")
	if !d.awaitServing(time.Minute) {
		n.t.Fatalf("%s exited (%v) before serving", d.Name(), d.State())
	}
	return d
}

// awaitHealth waits until podsyncd reports want on the node's socket; it
// returns false if the process exits first, and fails the test after
// timeout.
func (d *podsyncd) awaitHealth(want healthpb.HealthCheckResponse_ServingStatus, timeout time.Duration) bool {
	d.n.t.Helper()
	return d.AwaitHealth(d.n.conn, want, timeout)
}

// awaitServing waits until podsyncd reports SERVING; false if it exited.
func (d *podsyncd) awaitServing(timeout time.Duration) bool {
	d.n.t.Helper()
	return d.AwaitServing(d.n.conn, timeout)
}

// fired reports whether the log says the failpoint name fired.
func (d *podsyncd) fired(name string) bool {
	return strings.Contains(d.LogText(), "podsync failpoint "+name+" fired")
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
