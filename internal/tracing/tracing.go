package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Propagator is the propagation of every podsync process: W3C trace
// context and baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Enabled reports whether the environment asks for OTLP export: an
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, and
// neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Provider is a process's tracer provider and how to flush it.
type Provider struct {
	trace.TracerProvider
	sdk *sdktrace.TracerProvider
}

// Exporting reports whether spans are exported.
func (p *Provider) Exporting() bool { return p.sdk != nil }

// Shutdown exports the spans still buffered and stops the exporter,
// within ctx. It does nothing when nothing is exported.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut tracing down: %w", err)
	}
	return nil
}

// Setup returns the tracer provider the environment asks for, and makes
// it and Propagator otel's globals: with Enabled, a batching SDK provider
// exporting over OTLP — gRPC when OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (or
// OTEL_EXPORTER_OTLP_PROTOCOL) is "grpc", HTTP with protobuf when it is
// "http/protobuf" or unset, the specification's default — with the
// exporter's, the sampler's (OTEL_TRACES_SAMPLER) and the batch
// processor's (OTEL_BSP_*) own variables honoured, and a resource of
// service.name service (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// win) and service.version version; otherwise a no-op provider, under
// which trace context still propagates. Call Shutdown before exiting.
func Setup(ctx context.Context, service, version string) (*Provider, error) {
	otel.SetTextMapPropagator(Propagator())
	if !Enabled(os.Getenv) {
		p := &Provider{TracerProvider: noop.NewTracerProvider()}
		otel.SetTracerProvider(p.TracerProvider)
		return p, nil
	}
	exp, err := exporter(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(sdk)
	return &Provider{TracerProvider: sdk, sdk: sdk}, nil
}

// exporter is the OTLP exporter of the environment's protocol.
func exporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch proto {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: podsync exports over grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	return exp, nil
}
