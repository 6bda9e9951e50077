package vk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The node library's errors reach podsync-vk's log with their fields; its
// per-pod chatter does not at the default level.
func TestTheNodeLibrarysErrorsAreLogged(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	ctx := vklog.WithLogger(context.Background(), newNodeLibraryLogger(zap.New(core)))

	base := vklog.G(ctx).WithField("key", "default/web")
	base.Info("Updated k8s pod status")
	base.Debugf("processing %s", "default/web")
	base.WithError(withStack{errors.New("update status: conflict")}).WithFields(vklog.Fields{"method": "updatePodStatus"}).Error("Error processing pod status update")
	base.Warnf("not enqueuing pod status update due to error from pod lister")

	got := logs.All()
	if len(got) != 2 {
		t.Fatalf("logged %d lines, want the error and the warning: %+v", len(got), got)
	}
	e := got[0]
	if e.Level != zapcore.ErrorLevel || e.Message != "Error processing pod status update" || e.LoggerName != "node-library" {
		t.Errorf("first line %v %q from %q, want the error from node-library", e.Level, e.Message, e.LoggerName)
	}
	fields := e.ContextMap()
	if len(fields) != 3 || fields["key"] != "default/web" || fields["method"] != "updatePodStatus" || fields["error"] != "update status: conflict" {
		t.Errorf("error's fields %v, want key, method and the error's message (no stack trace)", fields)
	}
	// A field added to one line's logger is not another's.
	if w := got[1].ContextMap(); len(w) != 1 || w["key"] != "default/web" {
		t.Errorf("warning's fields %v, want only key", w)
	}
}

// withStack formats with %+v as github.com/pkg/errors' errors do, with a
// stack trace, which the node library's wrap its errors in.
type withStack struct{ error }

func (e withStack) Format(s fmt.State, _ rune) { _, _ = io.WriteString(s, e.Error()+"\n\tstack trace") }
