package provider

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// TestResourceMetricsAsTheKubelet is the kubelet's own test of its
// resource metrics collector (v1.37.2,
// pkg/kubelet/metrics/collectors/resource_metrics_test.go
// TestCollectResourceMetrics), its summaries and expected text, ported:
// without scrape_error, which a v1.37 kubelet hides (deprecated alpha),
// and without the swap cases (podsyncd reports no swap).
func TestResourceMetricsAsTheKubelet(t *testing.T) {
	// a static timestamp: 2021-06-23 05:11:18.302091597 +0800
	staticTimestamp := time.Unix(0, 1624396278302091597)
	testTime := metav1.NewTime(staticTimestamp)
	interesting := []string{
		"scrape_error",
		"resource_scrape_error",
		"node_cpu_usage_seconds_total",
		"node_memory_working_set_bytes",
		"node_swap_usage_bytes",
		"container_cpu_usage_seconds_total",
		"container_memory_working_set_bytes",
		"container_swap_usage_bytes",
		"container_swap_limit_bytes",
		"container_start_time_seconds",
		"pod_cpu_usage_seconds_total",
		"pod_memory_working_set_bytes",
		"pod_swap_usage_bytes",
	}
	container := func(name string, start time.Time, cpu, mem *uint64) statsv1alpha1.ContainerStats {
		return statsv1alpha1.ContainerStats{Name: name, StartTime: metav1.NewTime(start),
			CPU:    &statsv1alpha1.CPUStats{Time: testTime, UsageCoreNanoSeconds: cpu},
			Memory: &statsv1alpha1.MemoryStats{Time: testTime, WorkingSetBytes: mem}}
	}
	for _, tc := range []struct {
		name    string
		summary *statsv1alpha1.Summary
		failed  bool
		want    string
	}{
		{
			name:   "error getting summary",
			failed: true,
			want: `
				# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
				# TYPE resource_scrape_error gauge
				resource_scrape_error 1
			`,
		},
		{
			name: "arbitrary node metrics",
			summary: &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{
				CPU:    &statsv1alpha1.CPUStats{Time: testTime, UsageCoreNanoSeconds: ptr.To[uint64](10000000000)},
				Memory: &statsv1alpha1.MemoryStats{Time: testTime, WorkingSetBytes: ptr.To[uint64](1000)},
			}},
			want: `
				# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
				# TYPE node_cpu_usage_seconds_total counter
				node_cpu_usage_seconds_total 10 1624396278302
				# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
				# TYPE node_memory_working_set_bytes gauge
				node_memory_working_set_bytes 1000 1624396278302
				# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
				# TYPE resource_scrape_error gauge
				resource_scrape_error 0
			`,
		},
		{
			name: "nil node metrics",
			summary: &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{
				CPU:    &statsv1alpha1.CPUStats{Time: testTime},
				Memory: &statsv1alpha1.MemoryStats{Time: testTime},
			}},
			want: `
				# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
				# TYPE resource_scrape_error gauge
				resource_scrape_error 0
			`,
		},
		{
			name: "arbitrary container metrics for different container, pods and namespaces",
			summary: &statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{
				{PodRef: statsv1alpha1.PodReference{Name: "pod_a", Namespace: "namespace_a"}, Containers: []statsv1alpha1.ContainerStats{
					container("container_a", staticTimestamp.Add(-30*time.Second), ptr.To[uint64](10000000000), ptr.To[uint64](1000)),
					container("container_b", staticTimestamp.Add(-2*time.Minute), ptr.To[uint64](10000000000), ptr.To[uint64](1000)),
				}},
				{PodRef: statsv1alpha1.PodReference{Name: "pod_b", Namespace: "namespace_b"}, Containers: []statsv1alpha1.ContainerStats{
					container("container_a", staticTimestamp.Add(-10*time.Minute), ptr.To[uint64](10000000000), ptr.To[uint64](1000)),
				}},
			}},
			want: `
				# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
				# TYPE resource_scrape_error gauge
				resource_scrape_error 0
				# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
				# TYPE container_cpu_usage_seconds_total counter
				container_cpu_usage_seconds_total{container="container_a",namespace="namespace_a",pod="pod_a"} 10 1624396278302
				container_cpu_usage_seconds_total{container="container_a",namespace="namespace_b",pod="pod_b"} 10 1624396278302
				container_cpu_usage_seconds_total{container="container_b",namespace="namespace_a",pod="pod_a"} 10 1624396278302
				# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
				# TYPE container_memory_working_set_bytes gauge
				container_memory_working_set_bytes{container="container_a",namespace="namespace_a",pod="pod_a"} 1000 1624396278302
				container_memory_working_set_bytes{container="container_a",namespace="namespace_b",pod="pod_b"} 1000 1624396278302
				container_memory_working_set_bytes{container="container_b",namespace="namespace_a",pod="pod_a"} 1000 1624396278302
				# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
				# TYPE container_start_time_seconds gauge
				container_start_time_seconds{container="container_a",namespace="namespace_a",pod="pod_a"} 1.6243962483020916e+09
				container_start_time_seconds{container="container_a",namespace="namespace_b",pod="pod_b"} 1.6243956783020916e+09
				container_start_time_seconds{container="container_b",namespace="namespace_a",pod="pod_a"} 1.6243961583020916e+09
			`,
		},
		{
			name: "arbitrary container metrics for negative StartTime",
			summary: &statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{
				{PodRef: statsv1alpha1.PodReference{Name: "pod_a", Namespace: "namespace_a"}, Containers: []statsv1alpha1.ContainerStats{
					container("container_a", time.Unix(0, -1624396278302091597), ptr.To[uint64](10000000000), ptr.To[uint64](1000)),
				}},
			}},
			want: `
				# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
				# TYPE resource_scrape_error gauge
				resource_scrape_error 0
				# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
				# TYPE container_cpu_usage_seconds_total counter
				container_cpu_usage_seconds_total{container="container_a",namespace="namespace_a",pod="pod_a"} 10 1624396278302
				# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
				# TYPE container_memory_working_set_bytes gauge
				container_memory_working_set_bytes{container="container_a",namespace="namespace_a",pod="pod_a"} 1000 1624396278302
			`,
		},
		{
			name: "nil container metrics",
			summary: &statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{
				{PodRef: statsv1alpha1.PodReference{Name: "pod_a", Namespace: "namespace_a"}, Containers: []statsv1alpha1.ContainerStats{
					container("container_a", staticTimestamp.Add(-30*time.Second), nil, nil),
				}},
				{PodRef: statsv1alpha1.PodReference{Name: "pod_b", Namespace: "namespace_b"}, Containers: []statsv1alpha1.ContainerStats{
					container("container_a", staticTimestamp.Add(-10*time.Minute), ptr.To[uint64](10000000000), ptr.To[uint64](1000)),
				}},
			}},
			want: `
				# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
				# TYPE container_cpu_usage_seconds_total counter
				container_cpu_usage_seconds_total{container="container_a",namespace="namespace_b",pod="pod_b"} 10 1624396278302
				# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
				# TYPE container_memory_working_set_bytes gauge
				container_memory_working_set_bytes{container="container_a",namespace="namespace_b",pod="pod_b"} 1000 1624396278302
				# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
				# TYPE container_start_time_seconds gauge
				container_start_time_seconds{container="container_a",namespace="namespace_a",pod="pod_a"} 1.6243962483020916e+09
				container_start_time_seconds{container="container_a",namespace="namespace_b",pod="pod_b"} 1.6243956783020916e+09
				# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
				# TYPE resource_scrape_error gauge
				resource_scrape_error 0
			`,
		},
		{
			name: "arbitrary pod metrics",
			summary: &statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{{
				PodRef: statsv1alpha1.PodReference{Name: "pod_a", Namespace: "namespace_a"},
				CPU:    &statsv1alpha1.CPUStats{Time: testTime, UsageCoreNanoSeconds: ptr.To[uint64](10000000000)},
				Memory: &statsv1alpha1.MemoryStats{Time: testTime, WorkingSetBytes: ptr.To[uint64](1000)},
			}}},
			want: `
				# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
				# TYPE resource_scrape_error gauge
				resource_scrape_error 0
				# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
				# TYPE pod_cpu_usage_seconds_total counter
				pod_cpu_usage_seconds_total{namespace="namespace_a",pod="pod_a"} 10 1624396278302
				# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
				# TYPE pod_memory_working_set_bytes gauge
				pod_memory_working_set_bytes{namespace="namespace_a",pod="pod_a"} 1000 1624396278302
			`,
		},
		{
			name: "nil pod metrics",
			summary: &statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{{
				PodRef: statsv1alpha1.PodReference{Name: "pod_a", Namespace: "namespace_a"},
				CPU:    &statsv1alpha1.CPUStats{Time: testTime},
				Memory: &statsv1alpha1.MemoryStats{Time: testTime},
			}}},
			want: `
				# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
				# TYPE resource_scrape_error gauge
				resource_scrape_error 0
			`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := resourceMetrics{summary: tc.summary, failed: tc.failed}
			if err := testutil.CollectAndCompare(c, strings.NewReader(tc.want), interesting...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGetMetricsResource serves /metrics/resource from podsyncd's stats:
// the node's figures and this node's pods and containers, in the
// kubelet's text format with the samples' own times; a ListPodStats that
// fails is resource_scrape_error 1, not an error of the endpoint.
func TestGetMetricsResource(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	pod := testPod("1")
	if err := p.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	at := timestamppb.New(time.Unix(1700000000, 500_000_000))
	f.summary = &podsyncv1.ListPodStatsResponse{
		Node: &podsyncv1.NodeStats{Cpu: &podsyncv1.CPUStats{Time: at, UsageCoreNanoSeconds: 123_500_000_000},
			Memory: &podsyncv1.MemoryStats{Time: at, WorkingSetBytes: 2 << 30, AvailableBytes: new(uint64(6 << 30))}},
		Pods: []*podsyncv1.PodStats{
			{Namespace: pod.Namespace, Name: pod.Name, Uid: string(pod.UID),
				Cpu: &podsyncv1.CPUStats{Time: at, UsageCoreNanoSeconds: 1_250_000_000}, Memory: &podsyncv1.MemoryStats{Time: at, WorkingSetBytes: 4096},
				Containers: []*podsyncv1.ContainerStats{{Name: "c",
					Cpu: &podsyncv1.CPUStats{Time: at, UsageCoreNanoSeconds: 1_000_000_000}, Memory: &podsyncv1.MemoryStats{Time: at, WorkingSetBytes: 2048}}}},
			{Namespace: "default", Name: "podsyncs-own", Uid: uid1, Cpu: &podsyncv1.CPUStats{Time: at, UsageCoreNanoSeconds: 1}},
		},
	}
	families, err := p.GetMetricsResource(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	want := `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="c",namespace="default",pod="web"} 1 1700000000500
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="c",namespace="default",pod="web"} 2048 1700000000500
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 123.5 1700000000500
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 2.147483648e+09 1700000000500
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 1.25 1700000000500
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="web"} 4096 1700000000500
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`
	if b.String() != want {
		t.Errorf("/metrics/resource:\n%s\nwant:\n%s", b.String(), want)
	}

	f.summaryErr = errors.New("podsyncd is restarting")
	families, err = p.GetMetricsResource(t.Context())
	if err != nil {
		t.Fatalf("GetMetricsResource with podsyncd down = %v, want resource_scrape_error 1", err)
	}
	if len(families) != 1 || families[0].GetName() != "resource_scrape_error" || families[0].GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("families with podsyncd down = %v, want resource_scrape_error 1 alone", families)
	}
}
