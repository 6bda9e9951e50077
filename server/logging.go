package server

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/podsync/podsync/logx"
)

// RequestIDHeader is the response header that carries a call's request_id,
// so that a caller can find the call in podsyncd's log.
const RequestIDHeader = "x-request-id"

// upstreamKeys renames go-grpc-middleware's field keys to ours; keys not
// listed pass through unchanged.
var upstreamKeys = map[string]string{
	"grpc.code":             logx.GRPCCode,
	"grpc.error":            logx.Error,
	"grpc.time_ms":          logx.Duration,
	"grpc.duration":         logx.Duration,
	"peer.address":          logx.PeerAddress,
	"grpc.request.deadline": logx.Deadline,
}

// droppedKeys are upstream fields that say nothing zap does not (it
// timestamps every line) or that rpc_method already says.
var droppedKeys = map[string]bool{
	"grpc.start_time":  true,
	"grpc.component":   true,
	"grpc.service":     true,
	"grpc.method":      true,
	"grpc.method_type": true,
	"protocol":         true,
}

// interceptorLogger adapts zap to go-grpc-middleware's logging.Logger. It
// is shaped like the upstream zap example: fields become typed zap fields
// (with our key names) and the level picks the method.
//
// A read (a method RoleRead may call: GetPod, ListPods, health, …) that
// succeeds is logged at debug, not info: clients poll them, and a line per
// poll buried the calls that change the node (and cost GetPod a fifth of
// its CPU). Failures keep their level.
func interceptorLogger(l *zap.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		if lvl == logging.LevelInfo {
			if m, ok := grpc.Method(ctx); ok && requiredRole(m) == RoleRead {
				lvl = logging.LevelDebug
			}
		}
		if lvl == logging.LevelDebug && !l.Core().Enabled(zapcore.DebugLevel) {
			return
		}
		f := make([]zap.Field, 0, len(fields)/2)
		start, replayed := ctx.Value(callStartKey{}).(time.Time)
		for i := 0; i+1 < len(fields); i += 2 {
			key, ok := fields[i].(string)
			if !ok || droppedKeys[key] {
				continue
			}
			if k, ok := upstreamKeys[key]; ok {
				key = k
			}
			v := fields[i+1]
			if replayed && key == logx.Duration {
				v = time.Since(start) // the call's, not the replay's
			}
			switch v := v.(type) {
			case string:
				f = append(f, zap.String(key, v))
			case int:
				f = append(f, zap.Int(key, v))
			case bool:
				f = append(f, zap.Bool(key, v))
			case time.Duration:
				f = append(f, zap.Duration(key, v))
			case error:
				f = append(f, zap.NamedError(key, v))
			default:
				f = append(f, zap.Any(key, v))
			}
		}
		logger := l.WithOptions(zap.AddCallerSkip(1)).With(f...)
		switch lvl {
		case logging.LevelDebug:
			logger.Debug(msg)
		case logging.LevelInfo:
			logger.Info(msg)
		case logging.LevelWarn:
			logger.Warn(msg)
		case logging.LevelError:
			logger.Error(msg)
		default:
			logger.Error(msg, zap.String("unknown_level", fmt.Sprint(lvl)))
		}
	})
}

// callStartKey carries the start of a read that quietReads replays
// through the logging middleware.
type callStartKey struct{}

// quietReads wraps the logging middleware's unary interceptor. A read
// that ends at the middleware's info level (success, NOT_FOUND, …) is
// logged at debug (interceptorLogger); with debug off, it logs nothing.
// Yet the middleware builds its fields for every call before it knows
// the outcome: with the request scope's logger, a sixth of a GetPod's
// CPU. So with debug off a read runs without it, and only one that ends
// at warn or error passes through it afterwards, replayed with the
// handler's result; its line has the call's own duration.
func quietReads(logged grpc.UnaryServerInterceptor, l *zap.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if requiredRole(info.FullMethod) != RoleRead || l.Core().Enabled(zapcore.DebugLevel) {
			return logged(ctx, req, info, handler)
		}
		start := time.Now()
		resp, err := handler(ctx, req)
		if logging.DefaultServerCodeToLevel(status.Code(err)) < logging.LevelWarn {
			return resp, err
		}
		return logged(context.WithValue(ctx, callStartKey{}, start), req, info, func(context.Context, any) (any, error) {
			return resp, err
		})
	}
}

// loggingOptions make the middleware write one line per call, "finished
// call", with rpc_method, request_id, identity and role (from the fields
// the request scope put in ctx), grpc_code, duration and, on failure,
// error (the full chain, see UnaryErrorInterceptor).
func loggingOptions() []logging.Option {
	return []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithDurationField(func(d time.Duration) logging.Fields {
			return logging.Fields{logx.Duration, d}
		}),
		logging.WithDisableLoggingFields(
			logging.SystemTag[0],
			logging.ComponentFieldKey,
			logging.ServiceFieldKey,
			logging.MethodFieldKey,
			logging.MethodTypeFieldKey,
		),
	}
}

type loggerKey struct{}

// ContextLogger returns the logger of the call ctx belongs to, with the
// fields rpc_method, request_id, identity and role; or a no-op logger
// outside a call. Handlers log through it (STYLE.md "Logging").
func ContextLogger(ctx context.Context) *zap.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*zap.Logger); ok {
		return l
	}
	return zap.NewNop()
}

// WithLogger returns ctx carrying l for ContextLogger.
func WithLogger(ctx context.Context, l *zap.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// requestScope is what the outer interceptor learns about a call before
// anything else runs.
type requestScope struct {
	method    string
	requestID string
	identity  Identity
	role      Role
}

func newRequestScope(ctx context.Context, fullMethod string, authz *authorizer) requestScope {
	id := identityFromPeer(ctx)
	return requestScope{
		method:    fullMethod,
		requestID: uuid.NewString(),
		identity:  id,
		role:      authz.role(id),
	}
}

// context returns ctx with the identity, the request-scoped logger, the
// request's fields for the engine's lines (logx.WithFields), and the
// fields the logging middleware adds to its line.
func (rs requestScope) context(ctx context.Context, base *zap.Logger) context.Context {
	ctx = withIdentity(ctx, rs.identity)
	fields := []zap.Field{
		zap.String(logx.RPCMethod, rs.method),
		zap.String(logx.RequestID, rs.requestID),
		rs.identity.Field(),
		zap.Stringer(logx.Role, rs.role),
	}
	mw := logging.Fields{
		logx.RPCMethod, rs.method,
		logx.RequestID, rs.requestID,
		logx.Identity, rs.identity.String(),
		logx.Role, rs.role.String(),
	}
	// The call's trace (the otelgrpc stats handler, which runs first,
	// put the caller's, or its own span, in ctx): lines and spans meet.
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		fields = append(fields, zap.String(logx.TraceID, sc.TraceID().String()))
		mw = append(mw, logx.TraceID, sc.TraceID().String())
	}
	ctx = logx.WithFields(ctx, fields...)
	// Lazily: most calls log nothing, and With encodes the fields.
	ctx = WithLogger(ctx, base.WithLazy(fields...))
	return logging.InjectFields(ctx, mw)
}
