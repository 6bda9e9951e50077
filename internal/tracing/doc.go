// Package tracing sets up OpenTelemetry tracing for podsyncd, podsyncctl
// and podsync-vk from the standard OTEL_* environment variables: spans are
// exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, and nothing is exported
// otherwise. In both cases W3C trace context (traceparent, tracestate)
// and baggage propagate: a caller's trace reaches podsyncd's spans and
// the runtime's CRI calls.
package tracing
