package provider

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// TestStatsSummaryHasTheNodeAndItsPodsOnly: /stats/summary has podsyncd's
// node figures and the pods Kubernetes gave this node, each container
// started when its status says it started running.
func TestStatsSummaryHasTheNodeAndItsPodsOnly(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	n := &notified{ch: make(chan *corev1.Pod, 4)}
	p.NotifyPods(context.Background(), n.fn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-f.watched
	pod := testPod("1")
	if err := p.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	podStart, started := time.Unix(1700000000, 0), time.Unix(1700000030, 0)
	f.events <- &podsyncv1.WatchPodsResponse{Revision: 2, Pod: &podsyncv1.PodRef{Namespace: "default", Name: "web", Uid: uid1},
		Change: &podsyncv1.WatchPodsResponse_Status{Status: &podsyncv1.PodStatus{Phase: "Running", StartTime: timestamppb.New(podStart),
			ContainerStatuses: []*podsyncv1.ContainerStatus{{Name: "c", State: &podsyncv1.ContainerState{
				Running: &podsyncv1.ContainerStateRunning{StartedAt: timestamppb.New(started)}}}}}}}
	n.next(t)
	at := time.Unix(1700000100, 0)
	f.summary = &podsyncv1.ListPodStatsResponse{
		Node: &podsyncv1.NodeStats{Cpu: &podsyncv1.CPUStats{Time: timestamppb.New(at), UsageCoreNanoSeconds: 9, UsageNanoCores: new(uint64(4))},
			Memory: &podsyncv1.MemoryStats{Time: timestamppb.New(at), WorkingSetBytes: 100, RssBytes: 50, UsageBytes: 200, AvailableBytes: new(uint64(900))}},
		Pods: []*podsyncv1.PodStats{
			{Namespace: "default", Name: "web", Uid: string(pod.UID), Cpu: &podsyncv1.CPUStats{UsageCoreNanoSeconds: 7, UsageNanoCores: new(uint64(3))},
				Memory: &podsyncv1.MemoryStats{WorkingSetBytes: 1024},
				Containers: []*podsyncv1.ContainerStats{
					{Name: "c", Rootfs: &podsyncv1.FsStats{UsedBytes: 5}},
					{Name: "sidecar"}, // no status seen yet: the pod's start
				}},
			{Namespace: "default", Name: "web", Uid: uid2},          // an earlier incarnation
			{Namespace: "default", Name: "podsyncs-own", Uid: uid1}, // not given by Kubernetes
		},
	}
	s, err := p.GetStatsSummary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantNode := statsv1alpha1.NodeStats{NodeName: "vk-1",
		CPU: &statsv1alpha1.CPUStats{Time: metav1.NewTime(at), UsageCoreNanoSeconds: new(uint64(9)), UsageNanoCores: new(uint64(4))},
		Memory: &statsv1alpha1.MemoryStats{Time: metav1.NewTime(at), WorkingSetBytes: new(uint64(100)), RSSBytes: new(uint64(50)),
			UsageBytes: new(uint64(200)), AvailableBytes: new(uint64(900))}}
	if d := cmp.Diff(wantNode, s.Node); d != "" {
		t.Errorf("node (-want +got):\n%s", d)
	}
	if len(s.Pods) != 1 {
		t.Fatalf("pods = %+v, want this node's one", s.Pods)
	}
	got := s.Pods[0]
	if got.PodRef.Name != "web" || *got.CPU.UsageNanoCores != 3 || *got.CPU.UsageCoreNanoSeconds != 7 ||
		*got.Memory.WorkingSetBytes != 1024 || *got.Containers[0].Rootfs.UsedBytes != 5 {
		t.Errorf("pod stats = %+v", got)
	}
	if !got.StartTime.Equal(&metav1.Time{Time: podStart}) || !got.Containers[0].StartTime.Equal(&metav1.Time{Time: started}) ||
		!got.Containers[1].StartTime.Equal(&metav1.Time{Time: podStart}) {
		t.Errorf("start times: pod %s, c %s, sidecar %s; want %s, %s, %s", got.StartTime, got.Containers[0].StartTime, got.Containers[1].StartTime,
			podStart, started, podStart)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
}
