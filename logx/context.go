package logx

import (
	"context"

	"go.uber.org/zap"
)

type fieldsKey struct{}

// WithFields returns ctx carrying fields after those ctx already carries:
// the request scope (RequestID, RPCMethod, …) that every log line written
// on the request's behalf repeats, whichever package writes it.
func WithFields(ctx context.Context, fields ...zap.Field) context.Context {
	if len(fields) == 0 {
		return ctx
	}
	old := Fields(ctx)
	all := make([]zap.Field, 0, len(old)+len(fields))
	return context.WithValue(ctx, fieldsKey{}, append(append(all, old...), fields...))
}

// Fields returns the fields ctx carries, or nil.
func Fields(ctx context.Context) []zap.Field {
	f, _ := ctx.Value(fieldsKey{}).([]zap.Field)
	return f
}

// From returns base with the fields ctx carries: the logger of a line
// written on behalf of the request in ctx. base keeps its name and
// fields, so a component's lines stay its own.
func From(ctx context.Context, base *zap.Logger) *zap.Logger {
	if f := Fields(ctx); len(f) > 0 {
		return base.With(f...)
	}
	return base
}
