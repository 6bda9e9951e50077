// Package otlptest is an in-process OTLP trace receiver for tests: a
// gRPC TraceService on 127.0.0.1 that keeps the spans exported to it and
// renders a trace as a span tree.
package otlptest
