//go:build robustness

package robustness_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
	"github.com/podsync/podsync/server"
)

// The workload's shape.
const (
	namespace  = "robust"
	valueKey   = "robustness.podsync.io/value"
	clients    = 4
	podKeys    = 5
	objectKeys = 3
	// leasePod is the pod the stale lease holder writes to.
	leasePod = "lease"
	// callTimeout bounds every call.
	callTimeout = 30 * time.Second
)

// config is a run's shape: how long the load runs, how many times
// podsyncd is killed, what is armed.
type config struct {
	duration time.Duration
	kills    int
	// armed is PODSYNC_FAILPOINTS for every podsyncd of the run.
	armed string
	// cuts says whether client connections are cut at random.
	cuts bool
	// lease says whether the stale lease holder runs.
	lease bool
}

// TestRobustness runs the faulted load and checks its history.
func TestRobustness(t *testing.T) {
	d := 135 * time.Second
	if s := os.Getenv("PODSYNC_ROBUSTNESS_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("PODSYNC_ROBUSTNESS_DURATION: %v", err)
		}
	}
	r := newRun(t, config{duration: d, kills: max(3, int(d/(30*time.Second))), armed: failpoint.StoreCommit + "=sleep(5ms)", cuts: true, lease: true})
	r.load()
	ok, info := r.check()
	if !ok {
		r.saveVisualization(info)
		t.Fatal("porcupine refuses the history: it is not linearizable against the model")
	}
	r.checkWatch()
	r.cleanup()
}

// TestSkippedPreconditionsAreCaught runs podsyncd with its precondition
// checks turned off (the skip-preconditions failpoint): conditional
// writes then land on changed pods, and the checker must refuse the
// history — it can fail.
func TestSkippedPreconditionsAreCaught(t *testing.T) {
	r := newRun(t, config{duration: 20 * time.Second, armed: failpoint.SkipPreconditions + "=off"})
	r.load()
	ok, info := r.check()
	if ok {
		t.Fatal("porcupine accepts a history of podsyncd without precondition checks")
	}
	path := r.saveVisualization(info)
	t.Logf("as wanted, the history without precondition checks is refused (%s)", path)
	r.cleanup()
}

// record is one call of the history.
type record struct {
	client    int
	in        input
	out       output
	call, ret time.Time
	// traceID is the call's trace, by which podsyncd's log says when it
	// finished.
	traceID string
}

// run is one podsyncd node under load.
type run struct {
	t   *testing.T
	cfg config
	rng *mathrand.Rand
	// seed replays the run's random choices (PODSYNC_ROBUSTNESS_SEED).
	seed uint64

	socket, rootDir, podLogDir, logDir, configFile string
	conn                                           *grpc.ClientConn // uncut: setup, watch, checks
	cur                                            *localcritest.Podsyncd
	runs                                           int
	start, end                                     time.Time

	mu      sync.Mutex
	history []record
	kills   []time.Time
	// epochs are the lease epochs granted, in order.
	epochs []int64
	// staleLanded is set when a stale holder's value was read back.
	staleLanded []string

	watch *watchLog
}

func newRun(t *testing.T, cfg config) *run {
	seed := mathrand.Uint64()
	if s := os.Getenv("PODSYNC_ROBUSTNESS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("PODSYNC_ROBUSTNESS_SEED: %v", err)
		}
	}
	t.Logf("seed %d (PODSYNC_ROBUSTNESS_SEED replays it)", seed)
	r := &run{t: t, cfg: cfg, seed: seed, rng: mathrand.New(mathrand.NewPCG(seed, seed^0x5eed)),
		rootDir: t.TempDir(), podLogDir: t.TempDir(), logDir: logDir(t)}
	r.socket = filepath.Join(t.TempDir(), "podsync.sock")
	r.configFile = filepath.Join(t.TempDir(), "podsyncd.yaml")
	// Bursts of calls from several clients: no rate limit.
	if err := os.WriteFile(r.configFile, []byte("security:\n  rateLimit:\n    perSecond: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.conn, err = dial(r.socket, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer func() { _ = r.conn.Close() }()
		if r.cur != nil && !r.cur.Exited() {
			r.deletePods()
			r.cur.Stop()
		}
		if t.Failed() {
			t.Logf("podsyncd logs are in %s", r.logDir)
		}
	})
	r.startPodsyncd()
	return r
}

// logDir is where the run's podsyncd logs and artifacts go.
func logDir(t *testing.T) string {
	base := os.Getenv("PODSYNC_ROBUSTNESS_ARTIFACTS")
	if base == "" {
		base = filepath.Join(repoRoot(t), ".tmp", "logs", "robustness")
	}
	dir := filepath.Join(base, t.Name()+"-"+time.Now().UTC().Format("20060102T150405"))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	return dir
}

func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return dir
}

// startPodsyncd starts podsyncd on the run's directories and waits until
// it serves.
func (r *run) startPodsyncd() {
	r.t.Helper()
	r.runs++
	o := localcritest.PodsyncdOptions{
		Bin: podsyncdBin, Instance: inst, Socket: r.socket,
		RootDir: r.rootDir, PodLogDir: r.podLogDir,
		NodeName: "robust-" + inst.ID(), Config: r.configFile,
		Args:  []string{"--log-format=json"},
		Env:   []string{failpoint.EnvVar + "=" + r.cfg.armed},
		Log:   filepath.Join(r.logDir, fmt.Sprintf("podsyncd-%02d.log", r.runs)),
		Name:  fmt.Sprintf("podsyncd run %d", r.runs),
		Unset: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
	}
	r.cur = localcritest.StartPodsyncd(r.t, o)
	if !r.cur.AwaitServing(r.conn, 2*time.Minute) {
		r.t.Fatalf("%s exited (%v) before serving; log %s", r.cur.Name(), r.cur.State(), r.cur.Log())
	}
}

// dial connects to podsyncd's socket, through conns (if not nil), which
// collects the connections so that they can be cut.
func dial(socket string, conns *cutter) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second}),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
			if err == nil && conns != nil {
				conns.add(c)
			}
			return c, err
		}))
}

// cutter holds a client's connections, to cut them in the middle of calls.
type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (c *cutter) add(conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns = append(c.conns, conn)
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// load runs the clients, the watcher and the lease holders for the run's
// duration while the main goroutine kills podsyncd and cuts connections.
func (r *run) load() {
	t := r.t
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The watcher lists a store with a revision of its own: from revision
	// 0, the check's replay of the log would be a list again, not the
	// changes after it. An object of no client's gives it one.
	marker := &podsyncv1.ConfigMap{Metadata: &podsyncv1.ObjectMeta{Namespace: namespace, Name: "robustness-start"}, Data: map[string]string{"v": "start"}}
	if _, err := podsyncv1.NewPodSyncServiceClient(r.conn).ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{ConfigMaps: []*podsyncv1.ConfigMap{marker}},
		grpc.WaitForReady(true)); err != nil {
		t.Fatalf("apply the start marker: %v", err)
	}
	r.start = time.Now()
	r.watch = newWatchLog()
	var wg sync.WaitGroup
	wctx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		r.watch.follow(wctx, podsyncv1.NewPodSyncServiceClient(r.conn))
	}()
	cutters := make([]*cutter, clients)
	for i := range clients {
		cutters[i] = &cutter{}
		conn, err := dial(r.socket, cutters[i])
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		rng := mathrand.New(mathrand.NewPCG(r.seed, uint64(i)+1))
		wg.Go(func() { r.client(ctx, i, podsyncv1.NewPodSyncServiceClient(conn), rng) })
	}
	if r.cfg.lease {
		a, err := dial(r.socket, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = a.Close() }()
		wg.Go(func() { r.leaseHolders(ctx, podsyncv1.NewPodSyncServiceClient(a)) })
	}

	deadline := r.start.Add(r.cfg.duration)
	var nextKill time.Time
	if r.cfg.kills > 0 {
		nextKill = r.start.Add(r.cfg.duration / time.Duration(r.cfg.kills+1))
	}
	nextCut := time.Now().Add(r.jitter(2 * time.Second))
	for time.Now().Before(deadline) {
		now := time.Now()
		switch {
		case !nextKill.IsZero() && now.After(nextKill):
			// Somewhere in the middle of the calls in flight.
			r.cur.Kill()
			r.mu.Lock()
			r.kills = append(r.kills, time.Now())
			r.mu.Unlock()
			t.Logf("%s killed at +%s", r.cur.Name(), time.Since(r.start).Round(time.Millisecond))
			r.startPodsyncd()
			nextKill = nextKill.Add(r.cfg.duration / time.Duration(r.cfg.kills+1))
			if len(r.kills) >= r.cfg.kills {
				nextKill = time.Time{}
			}
		case r.cfg.cuts && now.After(nextCut):
			cutters[r.rng.IntN(clients)].cut()
			nextCut = now.Add(r.jitter(3 * time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	r.end = time.Now()
	// The watcher catches up with the store, then stops.
	r.watch.awaitRevision(t, r.currentRevision())
	stopWatch()
	<-watchDone
	if len(r.kills) < r.cfg.kills {
		t.Fatalf("%d kills, want %d", len(r.kills), r.cfg.kills)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("history: %d calls by %d clients in %s, %d kills, %d podsyncd runs, %d lease epochs, %d watch entries",
		len(r.history), clients, r.end.Sub(r.start).Round(time.Second), len(r.kills), r.runs, len(r.epochs), r.watch.count())
	if len(r.staleLanded) > 0 {
		t.Errorf("a stale lease holder's write landed: %v", r.staleLanded)
	}
	for i := 1; i < len(r.epochs); i++ {
		if r.epochs[i] <= r.epochs[i-1] {
			t.Errorf("lease epochs %v: not increasing across restarts", r.epochs)
			break
		}
	}
}

// jitter is a random duration in [d/2, 3d/2).
func (r *run) jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(r.rng.Int64N(int64(d)))
}

// currentRevision is the store's revision now.
func (r *run) currentRevision() int64 {
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	resp, err := podsyncv1.NewPodSyncServiceClient(r.conn).ListPods(ctx, &podsyncv1.ListPodsRequest{}, grpc.WaitForReady(true))
	if err != nil {
		r.t.Fatalf("ListPods: %v", err)
	}
	return resp.GetRevision()
}

// seen is what a client last learnt of a key.
type seen struct {
	exists bool
	uid    string
	rev    int64
}

// client issues random calls until ctx ends.
func (r *run) client(ctx context.Context, id int, c podsyncv1.PodSyncServiceClient, rng *mathrand.Rand) {
	last := map[string]seen{}
	for n := 0; ctx.Err() == nil; n++ {
		var in input
		if rng.IntN(10) < 7 {
			in.Key = fmt.Sprintf("pod/p%d", rng.IntN(podKeys))
		} else {
			in.Key = fmt.Sprintf("cm/c%d", rng.IntN(objectKeys))
		}
		l := last[in.Key]
		cond := rng.IntN(10)
		switch pod := strings.HasPrefix(in.Key, "pod/"); {
		case pod && cond < 3:
			in.Kind = opGetPod
		case pod && cond < 9:
			in.Kind, in.Value = opSyncPod, fmt.Sprintf("c%d-%d", id, n)
			in.UID = l.uid
			if !l.exists {
				in.UID = uuid.NewString()
			}
			switch p := rng.IntN(10); {
			case p < 5 && l.exists:
				in.PreRev = ptr.To(l.rev)
			case p < 7:
				in.PreRev = ptr.To[int64](0)
			}
		case pod:
			in.Kind = opDeletePod
			switch p := rng.IntN(10); {
			case p < 5 && l.exists:
				in.PreUID = l.uid
			case p < 7 && l.exists:
				in.PreRev = ptr.To(l.rev)
			}
		case cond < 4:
			in.Kind = opGetObject
		default:
			in.Kind, in.Value = opApplyObject, fmt.Sprintf("c%d-%d", id, n)
			switch p := rng.IntN(10); {
			case p < 5 && l.exists:
				in.PreRev = ptr.To(l.rev)
			case p < 6:
				in.PreRev = ptr.To[int64](0)
			}
		}
		rec, ok := r.call(ctx, id, c, in)
		if !ok {
			continue
		}
		o := rec.out
		switch {
		case o.Result == resNotFound || (in.Kind == opDeletePod && o.Result == resOK):
			last[in.Key] = seen{}
		case o.Result == resOK && (in.Kind == opGetPod || in.Kind == opGetObject || in.Kind == opApplyObject):
			last[in.Key] = seen{exists: true, uid: o.UID, rev: o.Rev}
		case o.Result == resRevisionMismatch || o.Result == resUIDMismatch:
			last[in.Key] = seen{exists: o.Rev != 0, uid: o.UID, rev: o.Rev}
		case o.Result == resOK && in.Kind == opSyncPod:
			// The pass moved the revision on: read it before the next
			// conditional write, sometimes only (stale ones are the point).
			last[in.Key] = seen{exists: true, uid: in.UID, rev: l.rev}
		}
		// Read-modify-write gaps, where other clients' writes land.
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
}

// newTraceID is a random W3C trace id.
func newTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// call makes one call and records it; ok is false for a failed read,
// which changed nothing and is left out of the history.
func (r *run) call(ctx context.Context, client int, c podsyncv1.PodSyncServiceClient, in input) (record, bool) {
	rec := record{client: client, in: in, traceID: newTraceID()}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	cctx = metadata.AppendToOutgoingContext(cctx, "traceparent", "00-"+rec.traceID+"-00f067aa0ba902b7-01")
	name := strings.SplitN(in.Key, "/", 2)[1]
	rec.call = time.Now()
	var err error
	switch in.Kind {
	case opGetPod:
		var resp *podsyncv1.GetPodResponse
		resp, err = c.GetPod(cctx, &podsyncv1.GetPodRequest{Namespace: namespace, Name: name}, grpc.WaitForReady(true))
		if err == nil {
			m := resp.GetPod().GetMetadata()
			rec.out = output{Result: resOK, UID: m.GetUid(), Value: m.GetAnnotations()[valueKey], Rev: resp.GetRevision(),
				Deleting: m.GetDeletionTimestamp() != nil}
		}
	case opSyncPod:
		err = r.syncPod(cctx, c, name, in)
		if err == nil {
			rec.out = output{Result: resOK}
		}
	case opDeletePod:
		req := &podsyncv1.DeletePodRequest{Namespace: namespace, Name: name, GracePeriodSeconds: ptr.To[int64](0),
			Precondition: &podsyncv1.Precondition{Revision: in.PreRev, Uid: in.PreUID}}
		var resp *podsyncv1.DeletePodResponse
		resp, err = c.DeletePod(cctx, req, grpc.WaitForReady(true))
		if err == nil {
			rec.out = output{Result: resOK, Found: resp.GetFound()}
		}
	case opGetObject:
		var resp *podsyncv1.GetObjectResponse
		resp, err = c.GetObject(cctx, &podsyncv1.GetObjectRequest{Kind: podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP, Namespace: namespace, Name: name},
			grpc.WaitForReady(true))
		if err == nil {
			cm := resp.GetObject().GetConfigMap()
			rv, _ := strconv.ParseInt(cm.GetMetadata().GetResourceVersion(), 10, 64)
			rec.out = output{Result: resOK, Value: cm.GetData()["v"], Rev: rv}
		}
	case opApplyObject:
		cm := &podsyncv1.ConfigMap{Metadata: &podsyncv1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string]string{"v": in.Value}}
		if in.PreRev != nil {
			cm.Metadata.ResourceVersion = revString(*in.PreRev)
		}
		var resp *podsyncv1.ApplyObjectsResponse
		resp, err = c.ApplyObjects(cctx, &podsyncv1.ApplyObjectsRequest{ConfigMaps: []*podsyncv1.ConfigMap{cm}}, grpc.WaitForReady(true))
		if err == nil {
			rv, _ := strconv.ParseInt(resp.GetResults()[0].GetObject().GetResourceVersion(), 10, 64)
			rec.out = output{Result: resOK, Rev: rv}
		}
	}
	rec.ret = time.Now()
	if err != nil {
		rec.out = outcome(err)
		if rec.out.Result == "" {
			r.t.Errorf("%s %s: %v", in.Kind, in.Key, err)
			return rec, false
		}
		if rec.out.Result == resUnknown && (in.Kind == opGetPod || in.Kind == opGetObject) {
			return rec, false
		}
		if rec.out.Result == resNotFound && in.Kind != opGetPod && in.Kind != opGetObject {
			rec.out = output{Result: resUnknown} // the pod went away during the call's pass
		}
	}
	r.mu.Lock()
	r.history = append(r.history, rec)
	r.mu.Unlock()
	return rec, true
}

// syncPod sends the pod of key name with in's value, uid and
// precondition, and reads the stream to its end.
func (r *run) syncPod(ctx context.Context, c podsyncv1.PodSyncServiceClient, name string, in input) error {
	pod, err := podProto(name, in.UID, in.Value)
	if err != nil {
		r.t.Fatal(err)
	}
	req := &podsyncv1.SyncPodRequest{Pod: pod}
	if in.PreRev != nil || in.PreUID != "" {
		req.Precondition = &podsyncv1.Precondition{Revision: in.PreRev, Uid: in.PreUID}
	}
	stream, err := c.SyncPod(ctx, req, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// podProto is the pod of key name: one busybox container that sleeps,
// its value in an annotation (a change restarts nothing).
func podProto(name, uid, value string) (*podsyncv1.Pod, error) {
	return convert.PodToProto(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: typesUID(uid), Annotations: map[string]string{valueKey: value}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{localcritest.Busybox("app", "sleep", "3600")},
		},
	})
}

// reasonOf is the ErrorInfo reason of err.
func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.GetReason()
		}
	}
	return ""
}

// outcome classifies a failed call: a precondition's refusal (with the
// current revision and uid), a definite refusal, NOT_FOUND, or unknown —
// the call may or may not have changed the node. "" is an error the
// workload must never cause.
func outcome(err error) output {
	st := status.Convert(err)
	var reason string
	md := map[string]string{}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			reason, md = ei.GetReason(), ei.GetMetadata()
		}
	}
	rev, _ := strconv.ParseInt(md[errorinfo.MetadataRevision], 10, 64)
	switch {
	case st.Code() == codes.Aborted && reason == errorinfo.ReasonRevisionMismatch:
		return output{Result: resRevisionMismatch, Rev: rev, UID: md[errorinfo.MetadataUID]}
	case st.Code() == codes.Aborted && reason == errorinfo.ReasonUIDMismatch:
		return output{Result: resUIDMismatch, Rev: rev, UID: md[errorinfo.MetadataUID]}
	case st.Code() == codes.AlreadyExists:
		return output{Result: resAlreadyExists}
	case st.Code() == codes.NotFound:
		return output{Result: resNotFound}
	case st.Code() == codes.InvalidArgument, st.Code() == codes.PermissionDenied, st.Code() == codes.Unimplemented:
		return output{}
	}
	// UNAVAILABLE (a cut, a kill), DEADLINE_EXCEEDED, ABORTED by a
	// deletion after the spec was stored, …
	return output{Result: resUnknown}
}

// leaseHolders plays two control planes of one identity that take the
// node's lease over from each other: after each takeover, the holder it
// replaced sends a write under its old epoch, which must be refused
// (LEASE_SUPERSEDED) and never land.
func (r *run) leaseHolders(ctx context.Context, c podsyncv1.PodSyncServiceClient) {
	uid := uuid.NewString()
	for round := 0; ctx.Err() == nil; round++ {
		old, ok := r.acquire(ctx, c)
		if !ok {
			return
		}
		cur, ok := r.acquire(ctx, c)
		if !ok {
			return
		}
		stale := fmt.Sprintf("stale-%d", old)
		err := r.leaseWrite(ctx, c, old, uid, stale)
		st := status.Convert(err)
		switch {
		case err == nil:
			r.mu.Lock()
			r.staleLanded = append(r.staleLanded, stale+" (SyncPod answered OK)")
			r.mu.Unlock()
		case st.Code() == codes.FailedPrecondition:
			if reasonOf(err) != errorinfo.ReasonLeaseSuperseded {
				r.t.Errorf("stale write of epoch %d: %v, want LEASE_SUPERSEDED", old, err)
			}
		}
		_ = r.leaseWrite(ctx, c, cur, uid, fmt.Sprintf("fresh-%d", cur))
		r.checkLeasePod(ctx, c)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	r.checkLeasePod(context.WithoutCancel(ctx), c)
}

// acquire acquires the lease (retrying while podsyncd restarts) and
// records its epoch.
func (r *run) acquire(ctx context.Context, c podsyncv1.PodSyncServiceClient) (int64, bool) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := c.AcquireLease(cctx, &podsyncv1.AcquireLeaseRequest{Ttl: durationpb.New(time.Minute)}, grpc.WaitForReady(true))
		cancel()
		if err == nil {
			r.mu.Lock()
			r.epochs = append(r.epochs, resp.GetLease().GetEpoch())
			r.mu.Unlock()
			return resp.GetLease().GetEpoch(), true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, false
}

func (r *run) leaseWrite(ctx context.Context, c podsyncv1.PodSyncServiceClient, epoch int64, uid, value string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	cctx = metadata.AppendToOutgoingContext(cctx, server.LeaseEpochHeader, strconv.FormatInt(epoch, 10))
	return r.syncPod(cctx, c, leasePod, input{UID: uid, Value: value})
}

// checkLeasePod records a stale value read back from the lease's pod.
func (r *run) checkLeasePod(ctx context.Context, c podsyncv1.PodSyncServiceClient) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.GetPod(cctx, &podsyncv1.GetPodRequest{Namespace: namespace, Name: leasePod}, grpc.WaitForReady(true))
	if err != nil {
		return
	}
	if v := resp.GetPod().GetMetadata().GetAnnotations()[valueKey]; strings.HasPrefix(v, "stale-") {
		r.mu.Lock()
		r.staleLanded = append(r.staleLanded, v)
		r.mu.Unlock()
	}
}

// check checks the history with porcupine: each call whose outcome is
// unknown may have taken effect until podsyncd's log says it finished,
// or until the kill that ended it, or the end of the run.
func (r *run) check() (bool, porcupine.LinearizationInfo) {
	t := r.t
	finished := r.finishTimes()
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := make([]porcupine.Operation, 0, len(r.history))
	unknown, resolved := 0, 0
	for _, rec := range r.history {
		ret := rec.ret
		if rec.out.Result == resUnknown {
			unknown++
			ret = r.end
			if at, ok := finished[rec.traceID]; ok {
				ret, resolved = at, resolved+1
			} else if i := slices.IndexFunc(r.kills, func(k time.Time) bool { return k.After(rec.call) }); i >= 0 {
				ret = r.kills[i]
			}
			ret = maxTime(ret, rec.ret)
		}
		ops = append(ops, porcupine.Operation{ClientId: rec.client, Input: rec.in, Output: rec.out,
			Call: rec.call.Sub(r.start).Nanoseconds(), Return: ret.Sub(r.start).Nanoseconds()})
	}
	t.Logf("checking %d calls (%d of unknown outcome, %d of them bounded by podsyncd's log)", len(ops), unknown, resolved)
	begin := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model.ToModel(), ops, 5*time.Minute)
	t.Logf("porcupine: %s in %s", res, time.Since(begin).Round(time.Millisecond))
	if res == porcupine.Unknown {
		t.Fatal("porcupine did not decide within 5 minutes")
	}
	if res == porcupine.Illegal {
		r.dumpRefused(ops)
	}
	return res == porcupine.Ok, info
}

// dumpRefused writes the calls of each key whose history porcupine
// refuses, in call order, to refused-KEY.txt beside the visualization.
func (r *run) dumpRefused(ops []porcupine.Operation) {
	m := model.ToModel()
	for _, part := range m.Partition(ops) {
		if porcupine.CheckOperations(m, part) {
			continue
		}
		key := part[0].Input.(input).Key
		slices.SortFunc(part, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
		var b strings.Builder
		for _, op := range part {
			fmt.Fprintf(&b, "%10.3f %10.3f c%d %s\n", float64(op.Call)/1e9, float64(op.Return)/1e9, op.ClientId, m.DescribeOperation(op.Input, op.Output))
		}
		path := filepath.Join(r.logDir, "refused-"+strings.ReplaceAll(key, "/", "-")+".txt")
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			r.t.Error(err)
		}
		r.t.Logf("porcupine refuses the calls of %s: %s", key, path)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// finishTimes are the times podsyncd's logs say the history's calls
// finished, by trace id (rounded up to the log's millisecond).
func (r *run) finishTimes() map[string]time.Time {
	out := map[string]time.Time{}
	for i := 1; i <= r.runs; i++ {
		f, err := os.Open(filepath.Join(r.logDir, fmt.Sprintf("podsyncd-%02d.log", i)))
		if err != nil {
			r.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var line struct {
				TS      string `json:"ts"`
				Msg     string `json:"msg"`
				TraceID string `json:"trace_id"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "finished call" || line.TraceID == "" {
				continue
			}
			at, err := time.Parse("2006-01-02T15:04:05.000Z0700", line.TS)
			if err != nil {
				continue
			}
			out[line.TraceID] = at.Add(time.Millisecond)
		}
		_ = f.Close()
	}
	return out
}

// saveVisualization writes porcupine's HTML of the history.
func (r *run) saveVisualization(info porcupine.LinearizationInfo) string {
	path := filepath.Join(r.logDir, "history.html")
	if err := porcupine.VisualizePath(model.ToModel(), info, path); err != nil {
		r.t.Errorf("save the history's visualization: %v", err)
		return ""
	}
	r.t.Logf("the history's visualization is %s", path)
	return path
}

// checkWatch checks the watcher's stream against a replay of the
// revision log: every change once, in revision order, across podsyncd's
// restarts.
func (r *run) checkWatch() {
	t := r.t
	w := r.watch
	w.mu.Lock()
	got, from, listed := slices.Clone(w.entries), w.synced, w.listed
	w.mu.Unlock()
	if !listed {
		t.Fatal("the watcher never got its initial list")
	}
	for i := 1; i < len(got); i++ {
		if got[i].rev <= got[i-1].rev {
			t.Fatalf("watch entries out of order or repeated: revision %d after %d", got[i].rev, got[i-1].rev)
		}
	}
	if w.reconnects < len(r.kills) {
		t.Errorf("the watcher reconnected %d times for %d kills", w.reconnects, len(r.kills))
	}
	last := from
	if len(got) > 0 {
		last = got[len(got)-1].rev
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := podsyncv1.NewPodSyncServiceClient(r.conn).WatchPods(ctx, &podsyncv1.WatchPodsRequest{SinceRevision: from}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	var want []watchEntry
	for len(want) == 0 || want[len(want)-1].rev < last {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("replay the revision log from %d: %v", from, err)
		}
		want = append(want, entryOf(m))
	}
	cancel()
	if !slices.Equal(got, want) {
		t.Fatalf("the watcher's %d entries after revision %d differ from the log's %d", len(got), from, len(want))
	}
	deletions := 0
	for _, e := range got {
		if e.kind == "deleted" {
			deletions++
		}
	}
	t.Logf("watch: %d entries after revision %d, in order, each once, across %d reconnects; %d deletions", len(got), from, w.reconnects, deletions)
}

// cleanup deletes the run's pods and stops podsyncd.
func (r *run) cleanup() {
	r.deletePods()
	r.cur.Stop()
}

// deletePods deletes every pod of the run.
func (r *run) deletePods() {
	t := r.t
	c := podsyncv1.NewPodSyncServiceClient(r.conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{Namespace: namespace}, grpc.WaitForReady(true))
	if err != nil {
		t.Errorf("list the run's pods: %v", err)
		return
	}
	restarted := false
	for _, p := range resp.GetPods() {
		name := p.GetMetadata().GetName()
		del := func() error {
			_, err := c.DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: namespace, Name: name, GracePeriodSeconds: ptr.To[int64](0)},
				grpc.WaitForReady(true))
			return err
		}
		err := del()
		if err != nil && !restarted && strings.Contains(err.Error(), "cannot delete running task") {
			// containerd/containerd#11037 (as test/integration/faults'
			// restartForLeakedTasks): a kill during StartContainer leaves
			// the container reported exited (StartError, "failed to get
			// task pid: context canceled") over a task containerd cannot
			// delete until it restarts.
			t.Logf("delete %s: %v: containerd/containerd#11037, restarting containerd", name, err)
			if err := inst.Stop(ctx); err != nil {
				t.Fatalf("stop containerd: %v", err)
			}
			if err := inst.Start(ctx); err != nil {
				t.Fatalf("start containerd: %v", err)
			}
			restarted = true
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
				if err = del(); err == nil || time.Now().After(deadline) {
					break
				}
			}
		}
		if err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	}
}
