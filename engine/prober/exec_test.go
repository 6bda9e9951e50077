package prober

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"
)

// newTestProber returns the prober of a Manager built from opts.
func newTestProber(t *testing.T, opts Options) *prober {
	t.Helper()
	m := New(opts)
	t.Cleanup(m.Stop)
	return m.prober
}

// errTimedOut stands for cri-client's ErrCommandTimedOut.
var errTimedOut = errors.New("command timed out")

func TestExecProbe(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tests := []struct {
		name       string
		err        error
		want       outcome
		wantOutput string
		wantErr    bool
		wantCalls  int
	}{
		{name: "exit 0", err: nil, want: outcomeSuccess, wantOutput: "out:err", wantCalls: 1},
		{name: "exit error with status 0", err: utilexec.CodeExitError{Err: errors.New("ok"), Code: 0}, want: outcomeSuccess, wantOutput: "out:err", wantCalls: 1},
		{name: "non-zero exit", err: errExit1, want: outcomeFailure, wantOutput: "out:err", wantCalls: 1},
		{name: "wrapped non-zero exit", err: fmt.Errorf("exec: %w", errExit1), want: outcomeFailure, wantOutput: "out:err", wantCalls: 1},
		{name: "deadline exceeded", err: fmt.Errorf("exec sync: %w", context.DeadlineExceeded), want: outcomeFailure, wantOutput: "exec sync: context deadline exceeded", wantCalls: 1},
		{name: "timeout by IsExecTimeout", err: fmt.Errorf("%w: %q timed out after 1s", errTimedOut, "check"), want: outcomeFailure, wantOutput: `command timed out: "check" timed out after 1s`, wantCalls: 1},
		{name: "runtime error is retried, then an error", err: errors.New("runtime unavailable"), want: outcomeUnknown, wantErr: true, wantCalls: maxProbeRetries},
		{name: "container not found is not retried", err: status.Error(codes.NotFound, "no such container"), want: outcomeUnknown, wantErr: true, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakeExec()
			fake.stdout, fake.stderr = []byte("out:"), []byte("err")
			fake.set("check", tt.err)
			p := newTestProber(t, Options{Runtime: fake, IsExecTimeout: func(err error) bool {
				return errors.Is(err, errTimedOut) || errors.Is(err, context.DeadlineExceeded)
			}})
			spec := execProbe("check")
			spec.TimeoutSeconds = 3
			o, out, err := p.probe(ctx, spec, target{container: &corev1.Container{Name: "c"}, containerID: "c1"})
			if o != tt.want || (err != nil) != tt.wantErr || out != tt.wantOutput {
				t.Fatalf("probe = (%d, %q, %v), want (%d, %q, error %t)", o, out, err, tt.want, tt.wantOutput, tt.wantErr)
			}
			if n := fake.count("c1", "check"); n != tt.wantCalls {
				t.Fatalf("ExecSync called %d times, want %d", n, tt.wantCalls)
			}
			if fake.timeout != 3*time.Second {
				t.Fatalf("ExecSync timeout = %s, want 3s", fake.timeout)
			}
		})
	}
}

func TestExecProbeDefaultTimeoutMatch(t *testing.T) {
	fake := newFakeExec()
	fake.set("check", errTimedOut)
	p := newTestProber(t, Options{Runtime: fake})
	// Without IsExecTimeout, only context.DeadlineExceeded is a timeout.
	if o, _, err := p.execProbe(t.Context(), &corev1.ExecAction{Command: []string{"check"}}, target{container: &corev1.Container{}}, time.Second); o != outcomeUnknown || err == nil {
		t.Fatalf("execProbe = (%d, %v), want a probe error", o, err)
	}
	fake.set("check", context.DeadlineExceeded)
	if o, _, err := p.execProbe(t.Context(), &corev1.ExecAction{Command: []string{"check"}}, target{container: &corev1.Container{}}, time.Second); o != outcomeFailure || err != nil {
		t.Fatalf("execProbe = (%d, %v), want a failure", o, err)
	}
}

func TestExecProbeCommandAndOutput(t *testing.T) {
	fake := newFakeExec()
	fake.stdout = []byte(strings.Repeat("o", 8<<10))
	fake.stderr = []byte(strings.Repeat("e", 8<<10))
	p := newTestProber(t, Options{Runtime: fake})
	c := &corev1.Container{Name: "c", Env: []corev1.EnvVar{
		{Name: "PORT", Value: "8080"},
		{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
	}}
	action := &corev1.ExecAction{Command: []string{"check", "--port=$(PORT)", "$(FROM_SECRET)", "$(UNSET)", "$$(PORT)"}}
	o, out, err := p.execProbe(t.Context(), action, target{container: c, containerID: "c1"}, time.Second)
	if o != outcomeSuccess || err != nil {
		t.Fatalf("execProbe = (%d, %v), want success", o, err)
	}
	want := []string{"check", "--port=8080", "", "$(UNSET)", "$(PORT)"}
	if strings.Join(fake.lastCmd, "|") != strings.Join(want, "|") {
		t.Fatalf("command = %q, want %q", fake.lastCmd, want)
	}
	if len(out) != maxOutputBytes || !strings.HasPrefix(out, strings.Repeat("o", 8<<10)+"e") {
		t.Fatalf("output has %d bytes, want %d: stdout then stderr", len(out), maxOutputBytes)
	}
	if action.Command[1] != "--port=$(PORT)" {
		t.Fatal("the probe's command was modified")
	}
}

func TestExecProbeWithoutRuntime(t *testing.T) {
	p := newTestProber(t, Options{})
	_, _, err := p.execProbe(t.Context(), &corev1.ExecAction{Command: []string{"true"}}, target{container: &corev1.Container{}}, time.Second)
	if !errors.Is(err, errNoRuntime) {
		t.Fatalf("err = %v, want errNoRuntime", err)
	}
}
