//go:build integration

package daemon_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/server"
)

// syncErr runs SyncPod to its end: its result or its error.
func syncErr(ctx context.Context, c podsyncv1.PodSyncServiceClient, req *podsyncv1.SyncPodRequest) (*podsyncv1.SyncPodResult, error) {
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

// wantRefused checks err's code and ErrorInfo reason and returns its
// metadata.
func wantRefused(t *testing.T, err error, code codes.Code, reason string) map[string]string {
	t.Helper()
	st := status.Convert(err)
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && st.Code() == code && ei.GetReason() == reason {
			return ei.GetMetadata()
		}
	}
	t.Fatalf("%v, want %v with reason %s", err, code, reason)
	return nil
}

// TestStaleRevisionChangesNothing: a SyncPod under a revision the pod has
// moved past is REVISION_MISMATCH with the current revision, and the
// changed command it carries restarts nothing on containerd.
func TestStaleRevisionChangesNothing(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	pod := newCorePod(t, "", sleeper("app"))
	first := d.syncPod(ctx, t, pod)
	containerID := first.GetStatus().GetContainerStatuses()[0].GetContainerId()
	got, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: namespace, Name: pod.Name})
	if err != nil {
		t.Fatal(err)
	}
	read := got.GetRevision()
	// Another control plane changes the pod meanwhile.
	pod.Labels = map[string]string{"owner": "b"}
	d.syncPod(ctx, t, pod)

	stale := pod.DeepCopy()
	stale.Labels = map[string]string{"owner": "a"}
	stale.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}
	_, err = syncErr(ctx, d.client(), &podsyncv1.SyncPodRequest{Pod: podToProto(t, stale), Precondition: &podsyncv1.Precondition{Revision: &read}})
	md := wantRefused(t, err, codes.Aborted, errorinfo.ReasonRevisionMismatch)
	now, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: namespace, Name: pod.Name})
	if err != nil {
		t.Fatal(err)
	}
	if rev, _ := strconv.ParseInt(md[errorinfo.MetadataRevision], 10, 64); rev <= read || md[errorinfo.MetadataUID] != string(pod.UID) {
		t.Errorf("metadata %v: want a revision after %d and uid %s", md, read, pod.UID)
	}
	if l := now.GetPod().GetMetadata().GetLabels()["owner"]; l != "b" {
		t.Errorf("owner label %q after the refused write, want b", l)
	}
	cs := now.GetPod().GetStatus().GetContainerStatuses()
	if len(cs) != 1 || cs[0].GetContainerId() != containerID || cs[0].GetRestartCount() != 0 {
		t.Fatalf("container after the refused write: %v, want %s still running", cs, containerID)
	}
	// At the current revision the change applies (and restarts the container).
	rev := now.GetRevision()
	if _, err := syncErr(ctx, d.client(), &podsyncv1.SyncPodRequest{Pod: podToProto(t, stale), Precondition: &podsyncv1.Precondition{Revision: &rev}}); err != nil {
		t.Fatalf("write at the current revision: %v", err)
	}
}

// TestDeleteByOldUIDKeepsTheNewIncarnation: DeletePod with the uid of a
// deleted incarnation leaves the new one's sandbox running.
func TestDeleteByOldUIDKeepsTheNewIncarnation(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	old := newCorePod(t, "", sleeper("app"))
	d.syncPod(ctx, t, old)
	if _, err := d.client().DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: namespace, Name: old.Name, GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	cur := old.DeepCopy()
	cur.UID = "0b6e3f7c-9d1a-4c55-a0e2-5f1d2c3b4a59"
	d.syncPod(ctx, t, cur)
	_, err := d.client().DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: namespace, Name: old.Name, Uid: string(old.UID), GracePeriodSeconds: ptr.To[int64](0)})
	if md := wantRefused(t, err, codes.Aborted, errorinfo.ReasonUIDMismatch); md[errorinfo.MetadataUID] != string(cur.UID) {
		t.Errorf("metadata %v: want the live uid %s", md, cur.UID)
	}
	if ready, _ := sandboxesOf(ctx, t, runtimeClient(t), string(cur.UID)); len(ready) != 1 {
		t.Fatalf("the new incarnation has %d ready sandboxes after a delete of the old one, want 1", len(ready))
	}
}

// TestLeaseFencesAStaleHolder: with --require-lease an unleased write is
// LEASE_REQUIRED; after B takes the lease over and writes, A's write of
// the epoch before — one sent before the takeover and delayed in transit
// past it, too — is LEASE_SUPERSEDED and B's pod stays as B wrote it.
func TestLeaseFencesAStaleHolder(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{Args: []string{"--require-lease"}})
	pod := newCorePod(t, "", sleeper("app"))
	_, err := syncErr(ctx, d.client(), &podsyncv1.SyncPodRequest{Pod: podToProto(t, pod)})
	wantRefused(t, err, codes.FailedPrecondition, errorinfo.ReasonLeaseRequired)

	acquire := func() int64 {
		resp, err := d.client().AcquireLease(ctx, &podsyncv1.AcquireLeaseRequest{Ttl: durationpb.New(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetLease().GetEpoch()
	}
	under := func(epoch int64) context.Context {
		return metadata.AppendToOutgoingContext(ctx, server.LeaseEpochHeader, strconv.FormatInt(epoch, 10))
	}
	a := acquire()
	pod.Labels = map[string]string{"owner": "a"}
	if _, err := syncErr(under(a), d.client(), &podsyncv1.SyncPodRequest{Pod: podToProto(t, pod)}); err != nil {
		t.Fatalf("A's write under its lease: %v", err)
	}

	// A sends a write that a slow network holds until after the takeover.
	release := make(chan struct{})
	delayed, err := grpc.NewClient("unix://"+d.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			<-release
			return streamer(ctx, desc, cc, method, opts...)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = delayed.Close() }()
	late := pod.DeepCopy()
	late.Labels = map[string]string{"owner": "a-late"}
	lateReq := &podsyncv1.SyncPodRequest{Pod: podToProto(t, late)}
	lateErr := make(chan error, 1)
	go func() {
		_, err := syncErr(under(a), podsyncv1.NewPodSyncServiceClient(delayed), lateReq)
		lateErr <- err
	}()

	b := acquire() // a standby of the same identity takes over
	if b <= a {
		t.Fatalf("takeover epoch %d after %d", b, a)
	}
	pod.Labels = map[string]string{"owner": "b"}
	if _, err := syncErr(under(b), d.client(), &podsyncv1.SyncPodRequest{Pod: podToProto(t, pod)}); err != nil {
		t.Fatalf("B's write under the new lease: %v", err)
	}
	close(release)
	md := wantRefused(t, <-lateErr, codes.FailedPrecondition, errorinfo.ReasonLeaseSuperseded)
	if md[errorinfo.MetadataEpoch] != strconv.FormatInt(b, 10) {
		t.Errorf("metadata %v: want epoch %d", md, b)
	}
	_, err = syncErr(under(a), d.client(), lateReq)
	wantRefused(t, err, codes.FailedPrecondition, errorinfo.ReasonLeaseSuperseded)
	got, err := d.client().GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: namespace, Name: pod.Name})
	if err != nil || got.GetPod().GetMetadata().GetLabels()["owner"] != "b" {
		t.Fatalf("pod after the stale writes: %v, %v; want B's", got.GetPod().GetMetadata().GetLabels(), err)
	}
	node, err := d.client().GetNode(ctx, &podsyncv1.GetNodeRequest{})
	if err != nil || node.GetNode().GetLease().GetEpoch() != b || !node.GetNode().GetRequireLease() {
		t.Fatalf("GetNode: %v, %v", node.GetNode().GetLease(), err)
	}
	// The cleanup deletes the pod: under the lease.
	if _, err := d.client().DeletePod(under(b), &podsyncv1.DeletePodRequest{Namespace: namespace, Name: pod.Name, GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client().ReleaseLease(ctx, &podsyncv1.ReleaseLeaseRequest{Epoch: b}); err != nil {
		t.Fatal(err)
	}
}
