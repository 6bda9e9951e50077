package provider

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
)

// fakePodsync records the calls a provider makes and answers as told.
type fakePodsync struct {
	mu      sync.Mutex
	synced  []*podsyncv1.SyncPodRequest
	deleted []*podsyncv1.DeletePodRequest
	listed  []string // label selectors of ListPods
	watched chan *podsyncv1.WatchPodsRequest
	syncErr error
	health  healthpb.HealthCheckResponse_ServingStatus
	events  chan *podsyncv1.WatchPodsResponse
	calls   []string // SyncPod and ApplyObjects, in order
	// applied are the objects stored: each ApplyObjects, and those of
	// each SyncPod that carries some.
	applied []*podsyncv1.ApplyObjectsRequest
	// withObjectsErr, if set, fails a SyncPod that carries objects.
	withObjectsErr error
	// applyErr, if set, fails ApplyObjects (not recorded in applied).
	applyErr error
	exec     []client.ExecOptions
	// summary and summaryErr are ListPodStats' answer.
	summary    *podsyncv1.ListPodStatsResponse
	summaryErr error
	// ephemeral are the ephemeral containers podsyncd holds, by pod
	// namespace/name; added counts AddEphemeralContainer calls.
	ephemeral map[string][]*podsyncv1.EphemeralContainer
	added     []string
	addErr    error
	// addErrs, if any, answer the next AddEphemeralContainer calls, one
	// each, before addErr.
	addErrs []error
	// held, if set, is the pod GetPod answers with.
	held *podsyncv1.Pod
	// objDeleted are the DeleteObject calls, as "KIND namespace/name".
	objDeleted []string
	// final is the status DeletePod answers with.
	final *podsyncv1.PodStatus
	// deleteCalled, if set, is sent each DeletePod's request; deleteGate,
	// if set, holds DeletePod's answer until it is closed.
	deleteCalled chan *podsyncv1.DeletePodRequest
	deleteGate   chan struct{}
	// onSync, if set, runs in each SyncPod before it answers.
	onSync func()
}

func newFake() *fakePodsync {
	return &fakePodsync{watched: make(chan *podsyncv1.WatchPodsRequest, 1), events: make(chan *podsyncv1.WatchPodsResponse, 16),
		health: healthpb.HealthCheckResponse_SERVING}
}

func (f *fakePodsync) SyncPod(_ context.Context, req *podsyncv1.SyncPodRequest, _ func(*podsyncv1.SyncStep)) (*podsyncv1.SyncPodResult, error) {
	f.mu.Lock()
	onSync := f.onSync
	f.mu.Unlock()
	if onSync != nil {
		onSync()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = append(f.synced, req)
	f.calls = append(f.calls, "SyncPod")
	objects := len(req.GetConfigMaps())+len(req.GetSecrets()) > 0
	if objects && f.withObjectsErr != nil {
		return nil, f.withObjectsErr
	}
	if f.syncErr != nil {
		return nil, f.syncErr
	}
	if objects {
		f.applied = append(f.applied, &podsyncv1.ApplyObjectsRequest{ConfigMaps: req.GetConfigMaps(), Secrets: req.GetSecrets()})
	}
	return &podsyncv1.SyncPodResult{}, nil
}

func (f *fakePodsync) DeletePod(_ context.Context, req *podsyncv1.DeletePodRequest) (*podsyncv1.DeletePodResponse, error) {
	f.mu.Lock()
	f.deleted = append(f.deleted, req)
	called, gate := f.deleteCalled, f.deleteGate
	f.mu.Unlock()
	if called != nil {
		called <- req
	}
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &podsyncv1.DeletePodResponse{Found: true, Status: f.final}, nil
}

func (f *fakePodsync) GetPod(_ context.Context, namespace, name string) (*podsyncv1.GetPodResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held != nil {
		return &podsyncv1.GetPodResponse{Pod: f.held}, nil
	}
	// The incarnation last applied.
	var uid string
	for _, r := range f.synced {
		if m := r.GetPod().GetMetadata(); m.GetNamespace() == namespace && m.GetName() == name {
			uid = m.GetUid()
		}
	}
	return &podsyncv1.GetPodResponse{Pod: &podsyncv1.Pod{Metadata: &podsyncv1.ObjectMeta{Namespace: namespace, Name: name, Uid: uid},
		Spec: &podsyncv1.PodSpec{EphemeralContainers: f.ephemeral[namespace+"/"+name]}}}, nil
}

func (f *fakePodsync) AddEphemeralContainer(_ context.Context, req *podsyncv1.AddEphemeralContainerRequest) (*podsyncv1.AddEphemeralContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.added = append(f.added, req.GetEphemeralContainer().GetName())
	if len(f.addErrs) > 0 {
		err := f.addErrs[0]
		f.addErrs = f.addErrs[1:]
		return nil, err
	}
	if f.addErr != nil {
		return nil, f.addErr
	}
	if f.ephemeral == nil {
		f.ephemeral = map[string][]*podsyncv1.EphemeralContainer{}
	}
	k := req.GetNamespace() + "/" + req.GetName()
	f.ephemeral[k] = append(f.ephemeral[k], req.GetEphemeralContainer())
	return &podsyncv1.AddEphemeralContainerResponse{}, nil
}

func (f *fakePodsync) ListPods(_ context.Context, req *podsyncv1.ListPodsRequest) (*podsyncv1.ListPodsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listed = append(f.listed, req.GetLabelSelector())
	return &podsyncv1.ListPodsResponse{}, nil
}

func (f *fakePodsync) Watch(ctx context.Context, req *podsyncv1.WatchPodsRequest, fn func(*podsyncv1.WatchPodsResponse) error) error {
	f.watched <- req
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-f.events:
			if err := fn(m); err != nil {
				return err
			}
		}
	}
}

func (f *fakePodsync) Logs(context.Context, *podsyncv1.GetContainerLogsRequest, func(*podsyncv1.LogLine) error) error {
	return nil
}

func (f *fakePodsync) GetNode(context.Context) (*podsyncv1.Node, error) {
	return &podsyncv1.Node{
		Name: "host-1", Labels: map[string]string{"zone": "a"},
		Taints:      []*podsyncv1.Taint{{Key: "dedicated", Value: "x", Effect: "NoSchedule"}},
		Capacity:    map[string]string{"cpu": "2", "memory": "4Gi", "pods": "110"},
		Allocatable: map[string]string{"cpu": "1500m", "memory": "3Gi", "pods": "110"},
		SystemInfo: &podsyncv1.NodeSystemInfo{MachineId: "3d1219c7c4c5404aaa1f6d2a48adfda4", SystemUuid: "EC2C1B8A-0D4F-4E2B-8E1C-7A3F0A9B5C11",
			BootId: "3834f90e-e1b6-4f78-bff4-79fbb76efc09", KernelVersion: "6.1.0-18-amd64", OsImage: "Debian GNU/Linux 12 (bookworm)",
			ContainerRuntimeVersion: "containerd://2.1.4", OperatingSystem: "linux", Architecture: "arm64"},
	}, nil
}

func (f *fakePodsync) Health(context.Context) (healthpb.HealthCheckResponse_ServingStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.health, nil
}

const (
	uid1 = "00000000-0000-4000-8000-000000000001"
	uid2 = "00000000-0000-4000-8000-000000000002"
)

func testPod(uid string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: k8stypes.UID("00000000-0000-4000-8000-00000000000" + uid), Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:                      "vk-1",
			TerminationGracePeriodSeconds: new(int64(7)),
			Containers:                    []corev1.Container{{Name: "c", Image: "registry.example/app:1"}},
		},
	}
}

// notified collects the pods a provider notifies.
type notified struct {
	ch chan *corev1.Pod
}

func (n *notified) fn(p *corev1.Pod) { n.ch <- p }

func (n *notified) next(t *testing.T) *corev1.Pod {
	t.Helper()
	select {
	case p := <-n.ch:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no pod notified within 5s")
		return nil
	}
}

func TestCreatePodAppliesWithOwnerLabelAndUID(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	pod := testPod("1")
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if len(f.synced) != 1 {
		t.Fatalf("SyncPod calls = %d, want 1", len(f.synced))
	}
	m := f.synced[0].GetPod().GetMetadata()
	if got := m.GetLabels()[OwnerLabel]; got != "vk-1" {
		t.Errorf("owner label = %q, want vk-1", got)
	}
	if m.GetLabels()["app"] != "web" || m.GetUid() != uid1 {
		t.Errorf("labels %v uid %q: want the pod's own labels and uid kept", m.GetLabels(), m.GetUid())
	}
	if pod.Labels[OwnerLabel] != "" {
		t.Error("CreatePod modified its argument")
	}
	got, err := p.GetPod(context.Background(), "default", "web")
	if err != nil || got.UID != uid1 {
		t.Fatalf("GetPod = %v, %v", got, err)
	}
	if _, err := p.GetPod(context.Background(), "default", "other"); !errdefs.IsNotFound(err) {
		t.Errorf("GetPod of an unknown pod: %v, want a NotFound", err)
	}
}

func TestRefusedPodIsFailedWithPodsyncReason(t *testing.T) {
	f := newFake()
	refusal := &client.Error{Op: "SyncPod", Code: codes.FailedPrecondition, Reason: "PodSecurity",
		Message: `violates PodSecurity "baseline:latest": hostPath volumes (volume "root")`}
	f.syncErr = refusal
	p := New("vk-1", f, zap.NewNop())
	n := &notified{ch: make(chan *corev1.Pod, 4)}
	p.NotifyPods(context.Background(), n.fn)
	if err := p.CreatePod(context.Background(), testPod("1")); err != nil {
		t.Fatalf("CreatePod of a refused pod: %v, want nil (the refusal is the pod's status)", err)
	}
	got := n.next(t)
	if got.Status.Phase != corev1.PodFailed || got.Status.Reason != "PodSecurity" || got.Status.Message != refusal.Message {
		t.Errorf("status = %s %q %q, want Failed with podsync's reason and message", got.Status.Phase, got.Status.Reason, got.Status.Message)
	}
	// A transient error is the node library's to retry, not a verdict.
	f.syncErr = &client.Error{Op: "SyncPod", Code: codes.Unavailable}
	if err := p.CreatePod(context.Background(), testPod("2")); err == nil {
		t.Error("CreatePod with podsyncd unavailable: nil error, want one to retry")
	}
}

// TestFailedApplyIsRetried: after a create or an update that failed
// (podsyncd rate-limited it), GetPod answers as before it, so that the
// node library, which compares GetPod's pod with the API server's, calls
// CreatePod or UpdatePod again instead of taking the pod for applied.
func TestFailedApplyIsRetried(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	ctx := context.Background()
	f.syncErr = &client.Error{Op: "SyncPod", Code: codes.ResourceExhausted, Message: "rate limited"}
	pod := testPod("1")
	if err := p.CreatePod(ctx, pod); err == nil {
		t.Fatal("CreatePod rate-limited: nil error, want one to retry")
	}
	if got, err := p.GetPod(ctx, "default", "web"); got != nil || !errdefs.IsNotFound(err) {
		t.Fatalf("GetPod after a failed create = %v, %v; want NotFound, so that the library creates it again", got, err)
	}
	f.syncErr = nil
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// An update that fails leaves the applied pod, not the new one.
	f.syncErr = &client.Error{Op: "SyncPod", Code: codes.Unavailable}
	updated := pod.DeepCopy()
	updated.ResourceVersion = "2"
	updated.Spec.Containers[0].Image = "registry.example/app:2"
	if err := p.UpdatePod(ctx, updated); err == nil {
		t.Fatal("UpdatePod with podsyncd unavailable: nil error, want one to retry")
	}
	got, err := p.GetPod(ctx, "default", "web")
	if err != nil || got.Spec.Containers[0].Image != "registry.example/app:1" {
		t.Fatalf("GetPod after a failed update = %v, %v; want the pod applied before it", got, err)
	}
	f.syncErr = nil
	if err := p.UpdatePod(ctx, updated); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.GetPod(ctx, "default", "web"); got.Spec.Containers[0].Image != "registry.example/app:2" {
		t.Errorf("GetPod after the update = image %s, want app:2", got.Spec.Containers[0].Image)
	}
	if len(f.synced) != 4 {
		t.Errorf("SyncPod calls = %d, want 4 (each try reaches podsyncd)", len(f.synced))
	}
}

func TestDeletePodUsesGracePeriodAndUID(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	n := &notified{ch: make(chan *corev1.Pod, 4)}
	p.NotifyPods(context.Background(), n.fn)
	pod := testPod("1")
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	del := pod.DeepCopy()
	del.DeletionGracePeriodSeconds = new(int64(3))
	if err := p.DeletePod(context.Background(), del); err != nil {
		t.Fatal(err)
	}
	req := f.deleted[0]
	if req.GetUid() != uid1 || req.GetGracePeriodSeconds() != 3 || req.GracePeriodSeconds == nil {
		t.Errorf("DeletePod request = %v, want uid-1 with grace 3", req)
	}
	got := n.next(t)
	if got.Status.Phase != corev1.PodFailed {
		t.Errorf("phase after delete = %s, want Failed (terminal)", got.Status.Phase)
	}
	if _, err := p.GetPod(context.Background(), "default", "web"); !errdefs.IsNotFound(err) {
		t.Errorf("GetPod after delete: %v, want NotFound", err)
	}
}

func TestWatchedStatusIsNotifiedForItsIncarnationOnly(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	n := &notified{ch: make(chan *corev1.Pod, 4)}
	p.NotifyPods(context.Background(), n.fn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	req := <-f.watched
	if req.GetLabelSelector() != OwnerLabel+"=vk-1" {
		t.Errorf("watch selector = %q, want the owner label", req.GetLabelSelector())
	}
	if err := p.CreatePod(context.Background(), testPod("2")); err != nil {
		t.Fatal(err)
	}
	// A status of an earlier incarnation (uid-1) is not this pod's.
	f.events <- &podsyncv1.WatchPodsResponse{Revision: 4, Pod: &podsyncv1.PodRef{Namespace: "default", Name: "web", Uid: uid1},
		Change: &podsyncv1.WatchPodsResponse_Status{Status: &podsyncv1.PodStatus{Phase: "Failed"}}}
	f.events <- &podsyncv1.WatchPodsResponse{Revision: 5, Pod: &podsyncv1.PodRef{Namespace: "default", Name: "web", Uid: uid2},
		Change: &podsyncv1.WatchPodsResponse_Status{Status: &podsyncv1.PodStatus{Phase: "Running", PodIp: "10.88.0.5"}}}
	got := n.next(t)
	if got.Status.Phase != corev1.PodRunning || got.Status.PodIP != "10.88.0.5" || got.UID != uid2 {
		t.Errorf("notified %s %s %s, want uid-2 Running 10.88.0.5", got.UID, got.Status.Phase, got.Status.PodIP)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
}

func TestGetPodsListsOwnPodsOnly(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	if _, err := p.GetPods(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(f.listed) != 1 || f.listed[0] != OwnerLabel+"=vk-1" {
		t.Errorf("ListPods selectors = %q, want [%s=vk-1]", f.listed, OwnerLabel)
	}
}

func TestNodeFromPodsync(t *testing.T) {
	f := newFake()
	np, err := NewNode(context.Background(), f, NodeOptions{Name: "vk-1", InternalIP: "127.0.0.1", Port: 10250, HealthInterval: 10 * time.Millisecond}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	n := np.Node()
	if n.Name != "vk-1" || n.Labels["zone"] != "a" || n.Labels["kubernetes.io/hostname"] != "vk-1" {
		t.Errorf("name %q labels %v", n.Name, n.Labels)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taints = %v", n.Spec.Taints)
	}
	if q := n.Status.Allocatable[corev1.ResourceCPU]; q.MilliValue() != 1500 {
		t.Errorf("allocatable cpu = %s, want 1500m", q.String())
	}
	if q := n.Status.Capacity[corev1.ResourceMemory]; q.String() != "4Gi" {
		t.Errorf("capacity memory = %s, want 4Gi", q.String())
	}
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 || n.Status.Addresses[0].Address != "127.0.0.1" {
		t.Errorf("endpoint %v addresses %v", n.Status.DaemonEndpoints, n.Status.Addresses)
	}
	// kubectl get nodes -o wide: OS image, kernel and container runtime
	// as podsyncd reads them; the kubelet version is podsync-vk's.
	wantInfo := corev1.NodeSystemInfo{MachineID: "3d1219c7c4c5404aaa1f6d2a48adfda4", SystemUUID: "EC2C1B8A-0D4F-4E2B-8E1C-7A3F0A9B5C11",
		BootID: "3834f90e-e1b6-4f78-bff4-79fbb76efc09", KernelVersion: "6.1.0-18-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)",
		ContainerRuntimeVersion: "containerd://2.1.4", KubeletVersion: KubeletVersion, OperatingSystem: "linux", Architecture: "arm64"}
	if d := cmp.Diff(wantInfo, n.Status.NodeInfo); d != "" {
		t.Errorf("node info (-want +got):\n%s", d)
	}
	if ready(n) != corev1.ConditionTrue {
		t.Errorf("Ready = %s with podsyncd serving, want True", ready(n))
	}
	ch := make(chan *corev1.Node, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	np.NotifyNodeStatus(ctx, func(n *corev1.Node) { ch <- n })
	f.mu.Lock()
	f.health = healthpb.HealthCheckResponse_NOT_SERVING
	f.mu.Unlock()
	select {
	case n := <-ch:
		if ready(n) != corev1.ConditionFalse {
			t.Errorf("Ready = %s after podsyncd stopped serving, want False", ready(n))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no node status pushed after podsyncd stopped serving")
	}
	// The lease stays renewed, as a kubelet's with its runtime down, so
	// that the node library posts Ready=False.
	if err := np.Ping(context.Background()); err != nil {
		t.Errorf("Ping with podsyncd not serving: %v, want nil", err)
	}
	if n := np.Node(); ready(n) != corev1.ConditionFalse || n.Status.Conditions[0].Reason != "PodsyncUnavailable" {
		t.Errorf("Node() after podsyncd stopped serving: %v", n.Status.Conditions[0])
	}
}

func ready(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// TestCreatePodAsTheAPIServerStoresIt applies a pod with what the API
// server and the controllers fill in: podsyncd must get a request it
// accepts.
func TestCreatePodAsTheAPIServerStoresIt(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	pod := testPod("1")
	pod.GenerateName = "web-6474f658f6-"
	pod.Name = "web-6474f658f6-abcde"
	pod.ResourceVersion = "42"
	pod.CreationTimestamp = metav1.Now()
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-6474f658f6", UID: uid2, Controller: new(true)}}
	pod.Spec.ServiceAccountName = "default"
	pod.Spec.SchedulerName = "default-scheduler"
	pod.Spec.DNSPolicy = corev1.DNSClusterFirst
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.EnableServiceLinks = new(true)
	pod.Spec.Priority = new(int32(0))
	pod.Spec.PreemptionPolicy = new(corev1.PreemptLowerPriority)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
	pod.Spec.Tolerations = []corev1.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
	}
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	pod.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageReadFile
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	n := &notified{ch: make(chan *corev1.Pod, 4)}
	p.NotifyPods(context.Background(), n.fn)
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if len(f.synced) != 1 {
		st, _ := p.GetPodStatus(context.Background(), pod.Namespace, pod.Name)
		t.Fatalf("the pod was not sent to podsyncd: %s %s", st.Reason, st.Message)
	}
	if got := f.synced[0].GetPod().GetMetadata().GetName(); got != pod.Name {
		t.Errorf("name = %q, want %q", got, pod.Name)
	}
}

// TestFSGroupPassesThrough: a pod's fsGroup and fsGroupChangePolicy reach
// podsyncd as they are, so the node's volume ownership (the engine's, as
// for a pod sent directly) covers the pods of the control plane.
func TestFSGroupPassesThrough(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	pod := testPod("1")
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: new(int64(2000)), FSGroupChangePolicy: new(corev1.FSGroupChangeOnRootMismatch)}
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if len(f.synced) != 1 {
		st, _ := p.GetPodStatus(context.Background(), pod.Namespace, pod.Name)
		t.Fatalf("the pod was not sent to podsyncd: %s %s", st.Reason, st.Message)
	}
	sc := f.synced[0].GetPod().GetSpec().GetSecurityContext()
	if sc.GetFsGroup() != 2000 || sc.GetFsGroupChangePolicy() != "OnRootMismatch" {
		t.Errorf("securityContext sent: %v, want fsGroup 2000 and OnRootMismatch", sc)
	}
}
