package server_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/server"
)

// syncReq runs SyncPod to its end and returns its result or error.
func syncReq(ctx context.Context, c podsyncv1.PodSyncServiceClient, req *podsyncv1.SyncPodRequest) (*podsyncv1.SyncPodResult, error) {
	stream, err := c.SyncPod(ctx, req)
	if err != nil {
		return nil, err
	}
	var res *podsyncv1.SyncPodResult
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			return nil, err
		}
		if r := m.GetResult(); r != nil {
			res = r
		}
	}
}

// TestSyncPodPrecondition: a stale revision is ABORTED, REVISION_MISMATCH,
// with the current revision and uid, and changes nothing; "does not
// exist" refuses a known pod; the revision SyncPod's result reports is
// GetPod's and applies.
func TestSyncPodPrecondition(t *testing.T) {
	h := newSvcHarness(t)
	pod := testPod(t, "default", "web", map[string]string{"v": "1"})
	res, err := syncReq(h.ctx, h.c, &podsyncv1.SyncPodRequest{Pod: pod, Precondition: &podsyncv1.Precondition{Revision: ptr64(0)}})
	if err != nil {
		t.Fatalf("create if absent: %v", err)
	}
	got, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetRevision() == 0 || res.GetRevision() > got.GetRevision() {
		t.Errorf("SyncPod's revision %d, GetPod's %d", res.GetRevision(), got.GetRevision())
	}
	next := testPod(t, "default", "web", map[string]string{"v": "2"})
	stale := got.GetRevision() - 1
	_, err = syncReq(h.ctx, h.c, &podsyncv1.SyncPodRequest{Pod: next, Precondition: &podsyncv1.Precondition{Revision: &stale}})
	wantError(t, err, codes.Aborted, errorinfo.ReasonRevisionMismatch)
	md := errorMetadata(t, err)
	if md[errorinfo.MetadataRevision] != strconv.FormatInt(got.GetRevision(), 10) || md[errorinfo.MetadataUID] != got.GetPod().GetMetadata().GetUid() {
		t.Errorf("metadata %v, want revision %d and uid %s", md, got.GetRevision(), got.GetPod().GetMetadata().GetUid())
	}
	if after, _ := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"}); after.GetPod().GetMetadata().GetLabels()["v"] != "1" {
		t.Errorf("a refused SyncPod changed the labels to %v", after.GetPod().GetMetadata().GetLabels())
	}
	_, err = syncReq(h.ctx, h.c, &podsyncv1.SyncPodRequest{Pod: next, Precondition: &podsyncv1.Precondition{Revision: ptr64(0)}})
	wantError(t, err, codes.Aborted, errorinfo.ReasonRevisionMismatch)
	_, err = syncReq(h.ctx, h.c, &podsyncv1.SyncPodRequest{Pod: next, Precondition: &podsyncv1.Precondition{Uid: "6f1e7a4e-1d5b-4a8e-9c3b-2f0a1b2c3d4e"}})
	wantError(t, err, codes.Aborted, errorinfo.ReasonUIDMismatch)
	_, err = syncReq(h.ctx, h.c, &podsyncv1.SyncPodRequest{Pod: next, Precondition: &podsyncv1.Precondition{Revision: ptr64(-1)}})
	wantError(t, err, codes.InvalidArgument, errorinfo.ReasonInvalidSpec)
	cur, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	rev := cur.GetRevision()
	if _, err := syncReq(h.ctx, h.c, &podsyncv1.SyncPodRequest{Pod: next, Precondition: &podsyncv1.Precondition{Revision: &rev}}); err != nil {
		t.Fatalf("SyncPod at the current revision: %v", err)
	}
	// DeletePod at a stale revision deletes nothing.
	_, err = h.c.DeletePod(h.ctx, &podsyncv1.DeletePodRequest{Name: "web", Precondition: &podsyncv1.Precondition{Revision: &rev}})
	wantError(t, err, codes.Aborted, errorinfo.ReasonRevisionMismatch)
	_, err = h.c.DeletePod(h.ctx, &podsyncv1.DeletePodRequest{Name: "web", Uid: "a", Precondition: &podsyncv1.Precondition{Uid: "b"}})
	wantError(t, err, codes.InvalidArgument, errorinfo.ReasonInvalidSpec)
}

// TestRunPodsPreconditions: a precondition naming no pod of the batch is
// INVALID_ARGUMENT; a failed one rejects its pod alone.
func TestRunPodsPreconditions(t *testing.T) {
	h := newSvcHarness(t)
	h.sync(testPod(t, "default", "old", nil))
	run := func(pre ...*podsyncv1.PodPrecondition) (*podsyncv1.RunPodsSummary, error) {
		stream, err := h.c.RunPods(h.ctx, &podsyncv1.RunPodsRequest{Pods: []*podsyncv1.Pod{testPod(t, "default", "old", nil), testPod(t, "default", "new", nil)},
			Preconditions: pre})
		if err != nil {
			return nil, err
		}
		for {
			m, err := stream.Recv()
			if err != nil {
				return nil, err
			}
			if s := m.GetSummary(); s != nil {
				return s, nil
			}
		}
	}
	_, err := run(&podsyncv1.PodPrecondition{Name: "other", Precondition: &podsyncv1.Precondition{Revision: ptr64(0)}})
	wantError(t, err, codes.InvalidArgument, errorinfo.ReasonInvalidSpec)
	sum, err := run(&podsyncv1.PodPrecondition{Name: "old", Precondition: &podsyncv1.Precondition{Revision: ptr64(0)}},
		&podsyncv1.PodPrecondition{Name: "new", Precondition: &podsyncv1.Precondition{Revision: ptr64(0)}})
	if err != nil {
		t.Fatal(err)
	}
	if r := sum.GetResults(); len(r) != 2 || r[0].GetOutcome() != podsyncv1.PodOutcome_POD_OUTCOME_REJECTED || r[0].GetReason() != "PreconditionFailed" ||
		r[1].GetOutcome() != podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET {
		t.Fatalf("results %v: want old rejected (PreconditionFailed), new running", r)
	}
}

// TestLeaseFencesTheAPI: AcquireLease grants increasing epochs to its
// caller, shown by GetNode; a mutating call carrying a superseded epoch is
// FAILED_PRECONDITION, LEASE_SUPERSEDED, with the current lease; reads
// are not fenced; a malformed epoch is INVALID_ARGUMENT.
func TestLeaseFencesTheAPI(t *testing.T) {
	h := newFullHarness(t)
	first, err := h.c.AcquireLease(h.ctx, &podsyncv1.AcquireLeaseRequest{Ttl: durationpb.New(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.c.AcquireLease(h.ctx, &podsyncv1.AcquireLeaseRequest{Ttl: durationpb.New(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if first.GetLease().GetEpoch() != 1 || second.GetLease().GetEpoch() != 2 || second.GetLease().GetHolder() == "" {
		t.Fatalf("leases %v then %v: want epochs 1 and 2 with a holder", first.GetLease(), second.GetLease())
	}
	node, err := h.c.GetNode(h.ctx, &podsyncv1.GetNodeRequest{})
	if err != nil || node.GetNode().GetLease().GetEpoch() != 2 || node.GetNode().GetLease().GetHolder() != second.GetLease().GetHolder() ||
		node.GetNode().GetRequireLease() {
		t.Fatalf("GetNode: %v, %v", node.GetNode().GetLease(), err)
	}
	with := func(epoch string) context.Context {
		return metadata.AppendToOutgoingContext(h.ctx, server.LeaseEpochHeader, epoch)
	}
	pod := testPod(t, "default", "web", nil)
	_, err = syncReq(with("1"), h.c, &podsyncv1.SyncPodRequest{Pod: pod})
	wantError(t, err, codes.FailedPrecondition, errorinfo.ReasonLeaseSuperseded)
	if md := errorMetadata(t, err); md[errorinfo.MetadataEpoch] != "2" || md[errorinfo.MetadataHolder] != second.GetLease().GetHolder() {
		t.Errorf("metadata %v", md)
	}
	if _, err := h.c.GetPod(with("1"), &podsyncv1.GetPodRequest{Name: "web"}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetPod under a superseded epoch: %v, want NOT_FOUND (reads are not fenced)", err)
	}
	_, err = h.c.CreateVolume(with("1"), &podsyncv1.CreateVolumeRequest{Name: "data"})
	wantError(t, err, codes.FailedPrecondition, errorinfo.ReasonLeaseSuperseded)
	_, err = syncReq(with("x"), h.c, &podsyncv1.SyncPodRequest{Pod: pod})
	wantError(t, err, codes.InvalidArgument, errorinfo.ReasonInvalidSpec)
	if _, err := syncReq(with("2"), h.c, &podsyncv1.SyncPodRequest{Pod: pod}); err != nil {
		t.Fatalf("SyncPod under the current epoch: %v", err)
	}
	_, err = h.c.RenewLease(h.ctx, &podsyncv1.RenewLeaseRequest{Epoch: 1})
	wantError(t, err, codes.FailedPrecondition, errorinfo.ReasonLeaseSuperseded)
	if _, err := h.c.RenewLease(h.ctx, &podsyncv1.RenewLeaseRequest{Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	_, err = h.c.AcquireLease(h.ctx, &podsyncv1.AcquireLeaseRequest{Ttl: durationpb.New(2 * time.Hour)})
	wantError(t, err, codes.InvalidArgument, errorinfo.ReasonInvalidSpec)
	if resp, err := h.c.ReleaseLease(h.ctx, &podsyncv1.ReleaseLeaseRequest{Epoch: 2}); err != nil || !resp.GetReleased() {
		t.Fatalf("ReleaseLease: %v, %v", resp, err)
	}
}

// TestRequireLease: with RequireLease a mutating call without the current
// epoch is LEASE_REQUIRED; GetNode says so.
func TestRequireLease(t *testing.T) {
	h := newFullHarness(t, func(o *testdaemon.Options) {
		prev := o.Service
		o.Service = func(so *server.ServiceOptions) {
			prev(so)
			so.RequireLease = true
		}
	})
	pod := testPod(t, "default", "web", nil)
	_, err := syncReq(h.ctx, h.c, &podsyncv1.SyncPodRequest{Pod: pod})
	wantError(t, err, codes.FailedPrecondition, errorinfo.ReasonLeaseRequired)
	node, err := h.c.GetNode(h.ctx, &podsyncv1.GetNodeRequest{})
	if err != nil || !node.GetNode().GetRequireLease() || node.GetNode().GetLease() != nil {
		t.Fatalf("GetNode: %v, %v", node.GetNode(), err)
	}
	l, err := h.c.AcquireLease(h.ctx, &podsyncv1.AcquireLeaseRequest{Ttl: durationpb.New(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.AppendToOutgoingContext(h.ctx, server.LeaseEpochHeader, strconv.FormatInt(l.GetLease().GetEpoch(), 10))
	if _, err := syncReq(ctx, h.c, &podsyncv1.SyncPodRequest{Pod: pod}); err != nil {
		t.Fatalf("SyncPod under the lease: %v", err)
	}
	_, err = h.c.DeletePod(h.ctx, &podsyncv1.DeletePodRequest{Name: "web"}, grpc.WaitForReady(false))
	wantError(t, err, codes.FailedPrecondition, errorinfo.ReasonLeaseRequired)
}

func ptr64(v int64) *int64 { return &v }

// TestLeaseMetrics: the lease's epoch, holder and expiry are metrics.
func TestLeaseMetrics(t *testing.T) {
	d := testdaemon.New(t, testdaemon.Options{Transport: testdaemon.Bufconn})
	svc := server.NewService(server.ServiceOptions{Backend: server.BackendOf(d.Node)})
	reg := prometheus.NewRegistry()
	if err := server.RegisterLeaseMetrics(reg, svc); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader("# HELP podsync_lease_epoch Epoch of the node's lease (0: never acquired); it grows with every acquisition.\n"+
		"# TYPE podsync_lease_epoch gauge\npodsync_lease_epoch 0\n"), "podsync_lease_epoch", "podsync_lease_held"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Node.Leases().Acquire(t.Context(), "cn:controller-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	want := "# HELP podsync_lease_epoch Epoch of the node's lease (0: never acquired); it grows with every acquisition.\n" +
		"# TYPE podsync_lease_epoch gauge\npodsync_lease_epoch 1\n" +
		"# HELP podsync_lease_held 1 while the identity of the holder label holds the node's lease (expired or not); absent when released.\n" +
		"# TYPE podsync_lease_held gauge\npodsync_lease_held{holder=\"cn:controller-a\"} 1\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "podsync_lease_epoch", "podsync_lease_held"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "podsync_lease_expiry_timestamp_seconds"); err != nil || n != 1 {
		t.Fatalf("expiry metrics: %d, %v", n, err)
	}
}
