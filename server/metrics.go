package server

import (
	"context"
	"fmt"
	"net/http"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// handlingTimeBuckets reach minutes: SyncPod and RunPods streams last as
// long as image pulls and starts do.
var handlingTimeBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// newServerMetrics returns go-grpc-middleware's server metrics
// (grpc_server_started_total, grpc_server_handled_total,
// grpc_server_msg_received_total, grpc_server_msg_sent_total and the
// grpc_server_handling_seconds histogram), registered on reg.
func newServerMetrics(reg prometheus.Registerer) (*grpcprom.ServerMetrics, error) {
	m := grpcprom.NewServerMetrics(
		grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(handlingTimeBuckets)),
	)
	if err := reg.Register(m); err != nil {
		return nil, fmt.Errorf("register grpc server metrics: %w", err)
	}
	return m, nil
}

// MetricsHandler serves reg's metrics in the Prometheus exposition format,
// for podsyncd's --metrics-address.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry:          reg, // promhttp_metric_handler_errors_total
		EnableOpenMetrics: true,
	})
}

// SessionMetrics count the sessions into pods: podsync_sessions_open
// (gauge, by kind) and podsync_session_bytes_total (counter, by kind and
// direction "in", from the caller to the pod, or "out"). A nil
// *SessionMetrics counts nothing.
type SessionMetrics struct {
	open      *prometheus.GaugeVec
	byteCount *prometheus.CounterVec
}

// NewSessionMetrics registers the session metrics on reg, every kind at
// zero.
func NewSessionMetrics(reg prometheus.Registerer) (*SessionMetrics, error) {
	m := &SessionMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "podsync_sessions_open",
			Help: "Open sessions into pods (ExecSync, Exec, Attach, PortForward), by kind.",
		}, []string{"kind"}),
		byteCount: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podsync_session_bytes_total",
			Help: "Bytes moved by sessions into pods, by kind and direction (in: caller to pod; out: pod to caller).",
		}, []string{"kind", "direction"}),
	}
	for _, c := range []prometheus.Collector{m.open, m.byteCount} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register session metrics: %w", err)
		}
	}
	for _, k := range []string{sessionExecSync, sessionExec, sessionAttach, sessionPortForward} {
		m.open.WithLabelValues(k)
		m.byteCount.WithLabelValues(k, "in")
		m.byteCount.WithLabelValues(k, "out")
	}
	return m, nil
}

func (m *SessionMetrics) opened(kind string) {
	if m != nil {
		m.open.WithLabelValues(kind).Inc()
	}
}

func (m *SessionMetrics) closed(kind string) {
	if m != nil {
		m.open.WithLabelValues(kind).Dec()
	}
}

// bytes returns the adder of kind's bytes in direction, nil when m is.
func (m *SessionMetrics) bytes(kind, direction string) func(int64) {
	if m == nil {
		return nil
	}
	c := m.byteCount.WithLabelValues(kind, direction)
	return func(n int64) { c.Add(float64(n)) }
}

// leaseCollector describes the node's lease at each scrape:
// podsync_lease_epoch, podsync_lease_held{holder} (1 while an identity
// holds it, unexpired or not) and podsync_lease_expiry_timestamp_seconds.
type leaseCollector struct {
	svc                   *service
	epoch, held, expiries *prometheus.Desc
}

// RegisterLeaseMetrics registers on reg the metrics of the lease of svc's
// current node (a Service of NewService).
func RegisterLeaseMetrics(reg prometheus.Registerer, svc Service) error {
	s, ok := svc.(*service)
	if !ok {
		return fmt.Errorf("register lease metrics: %T is not NewService's", svc)
	}
	c := &leaseCollector{
		svc:   s,
		epoch: prometheus.NewDesc("podsync_lease_epoch", "Epoch of the node's lease (0: never acquired); it grows with every acquisition.", nil, nil),
		held: prometheus.NewDesc("podsync_lease_held", "1 while the identity of the holder label holds the node's lease (expired or not); absent when released.",
			[]string{"holder"}, nil),
		expiries: prometheus.NewDesc("podsync_lease_expiry_timestamp_seconds", "When the node's lease expires unless renewed, in Unix seconds; absent when released.", nil, nil),
	}
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("register lease metrics: %w", err)
	}
	return nil
}

func (c *leaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.epoch
	ch <- c.held
	ch <- c.expiries
}

func (c *leaseCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.svc.cur.Load()
	if b == nil || b.Leases == nil {
		return
	}
	l, err := b.Leases.Get(context.Background())
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.epoch, prometheus.GaugeValue, float64(l.Epoch))
	if l.Held() {
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, 1, l.Holder)
		ch <- prometheus.MustNewConstMetric(c.expiries, prometheus.GaugeValue, float64(l.Expires().UnixMilli())/1000)
	}
}
