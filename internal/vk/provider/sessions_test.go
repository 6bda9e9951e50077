package provider

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"go.uber.org/zap"
	utilexec "k8s.io/utils/exec"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// attachIO is the kubelet API's streams of one session.
type attachIO struct {
	out    *bytes.Buffer
	tty    bool
	resize chan api.TermSize
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (a attachIO) Stdin() io.Reader            { return nil }
func (a attachIO) Stdout() io.WriteCloser      { return nopCloser{a.out} }
func (a attachIO) Stderr() io.WriteCloser      { return nil }
func (a attachIO) TTY() bool                   { return a.tty }
func (a attachIO) Resize() <-chan api.TermSize { return a.resize }

func TestRunInContainerReportsTheExitCodeAsTheKubelet(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	out := &bytes.Buffer{}
	err := p.RunInContainer(t.Context(), "default", "web", "c", []string{"sh", "-c", "exit 2"}, attachIO{out: out})
	var ee utilexec.CodeExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 2 {
		t.Fatalf("RunInContainer = %v, want the kubelet's exit error with code 2", err)
	}
	if out.String() != "out\n" {
		t.Errorf("stdout = %q, want the command's", out.String())
	}
	if o := f.exec[0]; o.Namespace != "default" || o.Name != "web" || o.Container != "c" || o.Stdin != nil || o.Stderr != nil {
		t.Errorf("exec options = %+v", o)
	}
	if err := p.RunInContainer(t.Context(), "default", "web", "c", []string{"true"}, attachIO{out: out}); err != nil {
		t.Errorf("RunInContainer of a command exiting 0 = %v", err)
	}
}

func TestAttachForwardsTerminalSizesAndExitCode(t *testing.T) {
	p := New("vk-1", newFake(), zap.NewNop())
	out := &bytes.Buffer{}
	a := attachIO{out: out, tty: true, resize: make(chan api.TermSize, 1)}
	a.resize <- api.TermSize{Width: 80, Height: 24}
	err := p.AttachToContainer(t.Context(), "default", "web", "c", a)
	var ee utilexec.CodeExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 1 {
		t.Errorf("AttachToContainer = %v, want the container's exit code 1", err)
	}
	if out.String() != "80x24 default/web/c" {
		t.Errorf("podsync saw %q, want the terminal size 80x24 for default/web/c", out.String())
	}
}
