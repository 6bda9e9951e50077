package vk

import (
	"fmt"
	"slices"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// nodeLibraryLogger is the node library's logger (virtual-kubelet/log)
// over podsync-vk's: without it the library's errors, a pod status the
// API server refused or a lease it could not renew, are dropped. Its Info
// is one line per pod created, updated and status reported, which
// podsync-vk's own lines already say with more: it is logged at debug
// level. Fatal is logged as an error and does not end the process: a
// library does not decide that.
type nodeLibraryLogger struct {
	log *zap.Logger
	// fields are added when a line is written, not before: the library
	// adds fields per call (with tracing on), most of them never logged.
	fields []zap.Field
}

var _ vklog.Logger = nodeLibraryLogger{}

func newNodeLibraryLogger(log *zap.Logger) nodeLibraryLogger {
	return nodeLibraryLogger{log: log.WithOptions(zap.AddCallerSkip(2)).Named("node-library")}
}

// print writes a line of args at level, formatting them only if the
// level is on.
func (l nodeLibraryLogger) print(level zapcore.Level, args []any) {
	if l.log.Core().Enabled(level) {
		l.log.Log(level, fmt.Sprint(args...), l.fields...)
	}
}

func (l nodeLibraryLogger) printf(level zapcore.Level, format string, args []any) {
	if l.log.Core().Enabled(level) {
		l.log.Log(level, fmt.Sprintf(format, args...), l.fields...)
	}
}

func (l nodeLibraryLogger) Debug(args ...any) { l.print(zapcore.DebugLevel, args) }
func (l nodeLibraryLogger) Debugf(format string, args ...any) {
	l.printf(zapcore.DebugLevel, format, args)
}
func (l nodeLibraryLogger) Info(args ...any) { l.print(zapcore.DebugLevel, args) }
func (l nodeLibraryLogger) Infof(format string, args ...any) {
	l.printf(zapcore.DebugLevel, format, args)
}
func (l nodeLibraryLogger) Warn(args ...any) { l.print(zapcore.WarnLevel, args) }
func (l nodeLibraryLogger) Warnf(format string, args ...any) {
	l.printf(zapcore.WarnLevel, format, args)
}
func (l nodeLibraryLogger) Error(args ...any) { l.print(zapcore.ErrorLevel, args) }
func (l nodeLibraryLogger) Errorf(format string, args ...any) {
	l.printf(zapcore.ErrorLevel, format, args)
}
func (l nodeLibraryLogger) Fatal(args ...any) { l.print(zapcore.ErrorLevel, args) }
func (l nodeLibraryLogger) Fatalf(format string, args ...any) {
	l.printf(zapcore.ErrorLevel, format, args)
}

func (l nodeLibraryLogger) WithField(k string, v any) vklog.Logger {
	l.fields = append(slices.Clip(l.fields), zap.Any(k, v))
	return l
}

func (l nodeLibraryLogger) WithFields(f vklog.Fields) vklog.Logger {
	fields := slices.Grow(slices.Clip(l.fields), len(f))
	for k, v := range f {
		fields = append(fields, zap.Any(k, v))
	}
	l.fields = fields
	return l
}

// WithError adds err's message only: the library's errors are wrapped
// with github.com/pkg/errors, whose stack traces zap.Error would add to
// every line.
func (l nodeLibraryLogger) WithError(err error) vklog.Logger {
	msg := "<nil>"
	if err != nil {
		msg = err.Error()
	}
	l.fields = append(slices.Clip(l.fields), zap.String("error", msg))
	return l
}
