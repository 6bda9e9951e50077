package provider

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The kubelet's resource metrics (reference: kubelet v1.37.2,
// pkg/kubelet/metrics/collectors/resource_metrics.go), with its help
// texts and their stability levels as component-base writes them.
// scrape_error, deprecated since 1.29 and alpha, is hidden on a v1.37
// kubelet (component-base hides an alpha metric the release after its
// deprecation), so it is not served here either; the swap metrics are
// left out because podsyncd reports no swap.
var (
	nodeCPUUsageDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryUsageDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"[STABLE] Current working set of the node in bytes", nil, nil)
	containerCPUUsageDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemoryUsageDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"[STABLE] Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerStartTimeDesc = prometheus.NewDesc("container_start_time_seconds",
		"[STABLE] Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	podCPUUsageDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemoryUsageDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"[STABLE] Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	resourceScrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// GetMetricsResource is the kubelet's /metrics/resource of this node,
// what metrics-server scrapes for kubectl top: the node's, the pods' and
// their containers' CPU and memory from GetStatsSummary, as the kubelet's
// resource metrics collector writes them (each sample stamped with its
// stats' time). As on the kubelet, a summary that cannot be read is
// resource_scrape_error 1, served, and logged.
func (p *Provider) GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	sum, err := p.GetStatsSummary(ctx)
	if err != nil {
		p.log.Warn("resource metrics: no stats summary", zap.Error(err))
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(resourceMetrics{summary: sum, failed: err != nil}); err != nil {
		return nil, err
	}
	return reg.Gather()
}

// resourceMetrics is the kubelet's resource metrics collector over one
// summary.
type resourceMetrics struct {
	summary *statsv1alpha1.Summary
	// failed says the summary could not be read.
	failed bool
}

// Describe sends the metrics' descriptions.
func (resourceMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUUsageDesc, nodeMemoryUsageDesc, containerStartTimeDesc, containerCPUUsageDesc,
		containerMemoryUsageDesc, podCPUUsageDesc, podMemoryUsageDesc, resourceScrapeErrorDesc} {
		ch <- d
	}
}

// Collect sends the summary's metrics, as the kubelet's
// CollectWithStability: what a summary lacks (a nil CPU or memory, a
// container's unknown start) is left out.
func (m resourceMetrics) Collect(ch chan<- prometheus.Metric) {
	errors := 0.0
	if m.failed || m.summary == nil {
		errors = 1
	}
	ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, errors)
	if errors != 0 {
		return
	}
	n := m.summary.Node
	cpu(ch, nodeCPUUsageDesc, n.CPU)
	memory(ch, nodeMemoryUsageDesc, n.Memory)
	for _, pod := range m.summary.Pods {
		for _, c := range pod.Containers {
			if c.StartTime.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(containerStartTimeDesc, prometheus.GaugeValue,
					float64(c.StartTime.UnixNano())/float64(time.Second), c.Name, pod.PodRef.Name, pod.PodRef.Namespace)
			}
			cpu(ch, containerCPUUsageDesc, c.CPU, c.Name, pod.PodRef.Name, pod.PodRef.Namespace)
			memory(ch, containerMemoryUsageDesc, c.Memory, c.Name, pod.PodRef.Name, pod.PodRef.Namespace)
		}
		cpu(ch, podCPUUsageDesc, pod.CPU, pod.PodRef.Name, pod.PodRef.Namespace)
		memory(ch, podMemoryUsageDesc, pod.Memory, pod.PodRef.Name, pod.PodRef.Namespace)
	}
}

// cpu sends the cumulative CPU of s in core-seconds, stamped with its
// time.
func cpu(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsv1alpha1.CPUStats, labels ...string) {
	if s == nil || s.UsageCoreNanoSeconds == nil {
		return
	}
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time,
		prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(*s.UsageCoreNanoSeconds)/float64(time.Second), labels...))
}

// memory sends the working set of s, stamped with its time.
func memory(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsv1alpha1.MemoryStats, labels ...string) {
	if s == nil || s.WorkingSetBytes == nil {
		return
	}
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time,
		prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*s.WorkingSetBytes), labels...))
}
