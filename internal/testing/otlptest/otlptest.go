package otlptest

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Span is one received span.
type Span struct {
	// Service is the span's resource's service.name.
	Service string
	// Scope is the instrumentation scope's name.
	Scope string
	// TraceID, SpanID and ParentID are hex; ParentID is empty for a root.
	TraceID, SpanID, ParentID string
	// Name and Kind ("server", "client", "internal", …).
	Name, Kind string
	Start, End time.Time
	// Attributes are the span's attributes as text.
	Attributes map[string]string
	// Error is the status message of a span whose status is an error.
	Error string
}

// Receiver is an OTLP/gRPC trace receiver.
type Receiver struct {
	collectorpb.UnimplementedTraceServiceServer
	srv  *grpc.Server
	addr string

	mu      sync.Mutex
	spans   []Span
	arrived chan struct{} // closed and replaced on every export
}

// Start starts a receiver on 127.0.0.1; Stop it when done.
func Start() (*Receiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("otlp receiver: %w", err)
	}
	r := &Receiver{srv: grpc.NewServer(), addr: l.Addr().String(), arrived: make(chan struct{})}
	collectorpb.RegisterTraceServiceServer(r.srv, r)
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

// Stop stops the receiver.
func (r *Receiver) Stop() { r.srv.Stop() }

// Endpoint is the receiver's OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) Endpoint() string { return "http://" + r.addr }

// Env are the variables that make a podsync process export its spans to
// the receiver at once (gRPC, batches every 100 ms).
func (r *Receiver) Env() map[string]string {
	return map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": r.Endpoint(),
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_INSECURE": "true",
		"OTEL_BSP_SCHEDULE_DELAY":     "100",
	}
}

// Export receives spans.
func (r *Receiver) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Service: service, Scope: ss.GetScope().GetName(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), Name: s.GetName(), Kind: kind(s.GetKind()),
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())), //nolint:gosec // nanoseconds since 1970 fit
					Attributes: attrs(s.GetAttributes())}
				if len(s.GetParentSpanId()) > 0 {
					sp.ParentID = hex.EncodeToString(s.GetParentSpanId())
				}
				if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
					sp.Error = cmp.Or(s.GetStatus().GetMessage(), "error")
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.arrived)
	r.arrived = make(chan struct{})
	r.mu.Unlock()
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// WaitFor waits until cond holds for the spans received, or ctx ends,
// and returns the spans.
func (r *Receiver) WaitFor(ctx context.Context, cond func([]Span) bool) ([]Span, error) {
	for {
		r.mu.Lock()
		spans, arrived := slices.Clone(r.spans), r.arrived
		r.mu.Unlock()
		if cond(spans) {
			return spans, nil
		}
		select {
		case <-ctx.Done():
			return spans, fmt.Errorf("otlp receiver: %d spans, not the ones waited for: %w", len(spans), ctx.Err())
		case <-arrived:
		}
	}
}

// Trace returns the spans of traceID.
func Trace(spans []Span, traceID string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// Named returns the spans named name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Tree renders spans as a tree: each span under its parent, children by
// start time, with its service, kind, duration and the attributes keys
// names (when present); a span whose parent is not among spans is a root.
func Tree(spans []Span, keys ...string) string {
	byID := map[string]bool{}
	children := map[string][]Span{}
	for _, s := range spans {
		byID[s.SpanID] = true
	}
	var roots []Span
	for _, s := range spans {
		if s.ParentID == "" || !byID[s.ParentID] {
			roots = append(roots, s)
			continue
		}
		children[s.ParentID] = append(children[s.ParentID], s)
	}
	byStart := func(a, b Span) int { return cmp.Or(a.Start.Compare(b.Start), strings.Compare(a.Name, b.Name)) }
	var b strings.Builder
	var walk func(s Span, prefix string, last, root bool)
	walk = func(s Span, prefix string, last, root bool) {
		branch, next := "", ""
		if !root {
			branch, next = "├─ ", "│  "
			if last {
				branch, next = "└─ ", "   "
			}
		}
		fmt.Fprintf(&b, "%s%s%s [%s %s] %s", prefix, branch, s.Name, s.Service, s.Kind, s.End.Sub(s.Start).Round(100*time.Microsecond))
		for _, k := range keys {
			if v, ok := s.Attributes[k]; ok {
				fmt.Fprintf(&b, " %s=%s", k, v)
			}
		}
		if s.Error != "" {
			fmt.Fprintf(&b, " ERROR: %s", s.Error)
		}
		b.WriteString("\n")
		kids := children[s.SpanID]
		slices.SortFunc(kids, byStart)
		for i, c := range kids {
			walk(c, prefix+next, i == len(kids)-1, false)
		}
	}
	slices.SortFunc(roots, byStart)
	for _, s := range roots {
		walk(s, "", true, true)
	}
	return b.String()
}

func kind(k tracepb.Span_SpanKind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "SPAN_KIND_"))
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = fmt.Sprint(x.DoubleValue)
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}
