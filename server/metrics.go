package server

import (
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
