package syncer

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
)

// tracerName is the instrumentation scope of the syncer's spans.
const tracerName = "github.com/podsync/podsync/engine/syncer"

// SpanPass is the name of a sync pass's span; each step is a child span
// named after its action (CreatePodSandbox, PullImage, StartContainer,
// PostStartHook, …), and the CRI calls of the pass are children too when
// the runtime's client is traced (DialRuntimeWith).
const SpanPass = "sync pass"

// podAttributes are a pod's span attributes, OpenTelemetry's k8s names.
func podAttributes(pod *corev1.Pod) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("k8s.namespace.name", pod.Namespace),
		attribute.String("k8s.pod.name", pod.Name),
		attribute.String("k8s.pod.uid", string(pod.UID)),
	}
}

// startPass starts the span of a pass of pod under ctx's span.
func (s *Syncer) startPass(ctx context.Context, pod *corev1.Pod) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, SpanPass, trace.WithAttributes(podAttributes(pod)...))
}

// endPass ends a pass's span with its outcome.
func endPass(span trace.Span, res SyncResult, err error) {
	span.SetAttributes(attribute.Int("podsync.steps", len(res.Steps)))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceStep records a finished step as a span of the pass of ctx, from
// its start to its end.
func traceStep(ctx context.Context, tracer trace.Tracer, st StepResult) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("podsync.step.target", st.Target)}
	if st.Reason != "" {
		attrs = append(attrs, attribute.String("podsync.step.reason", st.Reason))
	}
	if st.ContainerType != "" {
		attrs = append(attrs, attribute.String("podsync.container.type", string(st.ContainerType)))
	}
	if st.ContainerID != "" {
		attrs = append(attrs, attribute.String("container.id", st.ContainerID))
	}
	if st.SandboxID != "" {
		attrs = append(attrs, attribute.String("podsync.sandbox.id", st.SandboxID))
	}
	_, span := tracer.Start(ctx, string(st.Action), trace.WithTimestamp(st.Start), trace.WithAttributes(attrs...))
	switch {
	case st.Err != nil:
		span.RecordError(st.Err)
		span.SetStatus(codes.Error, st.Message)
	case st.BackedOff():
		span.SetAttributes(attribute.String("podsync.step.next_retry", st.NextRetry.UTC().Format("2006-01-02T15:04:05Z07:00")))
	}
	span.End(trace.WithTimestamp(st.Start.Add(st.Duration)))
}
