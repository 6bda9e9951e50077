package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/podsync/podsync/internal/tracing"
)

// startTrace starts the span of the command when the environment asks
// for OTLP export (tracing.Enabled): its context reaches podsyncd with
// each call, so podsyncd's spans join the command's trace. The function
// it returns names the span after the command, ends it and exports it.
func (a *app) startTrace(ctx context.Context) (context.Context, func(*cobra.Command, error)) {
	if !tracing.Enabled(a.getenv) {
		return ctx, func(*cobra.Command, error) {}
	}
	tp, err := tracing.Setup(ctx, "podsyncctl", version())
	if err != nil {
		_, _ = fmt.Fprintf(a.stderr, "warning: tracing: %v\n", err)
		return ctx, func(*cobra.Command, error) {}
	}
	ctx, span := tp.Tracer("github.com/podsync/podsync/internal/cli").Start(ctx, "podsyncctl", trace.WithSpanKind(trace.SpanKindClient))
	return ctx, func(cmd *cobra.Command, err error) {
		if cmd != nil {
			span.SetName(cmd.CommandPath())
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			_, _ = fmt.Fprintf(a.stderr, "warning: tracing: %v\n", err)
		}
	}
}
