package daemon

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// klogRoute is where klog's lines go: the logger of the podsyncd run that
// started last among those still running, or nowhere. klog's logger is
// process-wide and may not be replaced while anything logs, so it is set
// once, to klogSink, which forwards to the current logger.
var klogRoute struct {
	once   sync.Once
	mu     sync.Mutex
	active []*zap.Logger
	cur    atomic.Pointer[zap.Logger]
}

// routeKlog sends klog's lines — k8s.io/cri-client logs through klog — to
// log (through go-logr/zapr) until the returned func is called; klog
// itself writes nothing to stderr from the first call on, and drops its
// lines while no run routes them.
//
// The verbosity is zapr's: klog's V(0) lines are logged at info, V(1) at
// debug, and V(2) and above (cri-client's connection chatter and its
// request and response dumps at V(10)) never. cri-client's error lines
// are logged at debug: it logs every failed call, NotFound on a container
// that went away and the end of the event stream at shutdown included,
// and returns the error to podsync, which logs it once where it handles
// it.
func routeKlog(log *zap.Logger) (stop func()) {
	klogRoute.once.Do(func() {
		klog.SetLoggerWithOptions(logr.New(&klogSink{}), klog.ContextualLogger(true))
	})
	klogRoute.mu.Lock()
	klogRoute.active = append(klogRoute.active, log)
	klogRoute.cur.Store(log)
	klogRoute.mu.Unlock()
	return func() {
		klogRoute.mu.Lock()
		defer klogRoute.mu.Unlock()
		if i := slices.Index(klogRoute.active, log); i >= 0 {
			klogRoute.active = slices.Delete(klogRoute.active, i, i+1)
		}
		var cur *zap.Logger
		if n := len(klogRoute.active); n > 0 {
			cur = klogRoute.active[n-1]
		}
		klogRoute.cur.Store(cur)
	}
}

// klogSink is klog's logr sink: it hands each line to zapr's sink on the
// current route, with the names, values and call depth klog gave it.
type klogSink struct {
	names  []string
	values []any
	depth  int
}

var _ logr.CallDepthLogSink = (*klogSink)(nil)

func (s *klogSink) Init(logr.RuntimeInfo) {}

// Enabled is zapr's mapping (V(n) is zap level -n) without building a
// logger: cri-client asks for V(10) on every call.
func (s *klogSink) Enabled(level int) bool {
	log := klogRoute.cur.Load()
	return log != nil && log.Core().Enabled(-zapcore.Level(min(level, 127)))
}

func (s *klogSink) Info(level int, msg string, keysAndValues ...any) {
	if t := s.target(); t != nil {
		t.Info(level, msg, keysAndValues...)
	}
}

// Error logs at debug (V(1)); see routeKlog.
func (s *klogSink) Error(err error, msg string, keysAndValues ...any) {
	t := s.target()
	if t == nil {
		return
	}
	if err != nil {
		keysAndValues = append(slices.Clip(keysAndValues), "error", err)
	}
	t.Info(1, msg, keysAndValues...)
}

// target returns zapr's sink on the current route, or nil.
func (s *klogSink) target() logr.LogSink {
	log := klogRoute.cur.Load()
	if log == nil {
		return nil
	}
	for _, n := range s.names {
		log = log.Named(n)
	}
	sink := zapr.NewLogger(log).GetSink()
	if len(s.values) > 0 {
		sink = sink.WithValues(s.values...)
	}
	// One more frame: this sink's method between logr and zapr.
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1 + s.depth)
	}
	return sink
}

func (s *klogSink) WithValues(keysAndValues ...any) logr.LogSink {
	c := *s
	c.values = append(slices.Clip(s.values), keysAndValues...)
	return &c
}

func (s *klogSink) WithName(name string) logr.LogSink {
	c := *s
	c.names = append(slices.Clip(s.names), name)
	return &c
}

func (s *klogSink) WithCallDepth(depth int) logr.LogSink {
	c := *s
	c.depth += depth
	return &c
}
