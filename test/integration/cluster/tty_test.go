//go:build integration

package cluster_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// terminal is a command running on a pseudo-terminal, as in a user's
// shell: kubectl -it needs one (it checks that stdin is a terminal and
// puts it in raw mode).
type terminal struct {
	ptm  *os.File
	cmd  *exec.Cmd
	out  lockedBuffer
	done chan error
}

// startOnTerminal starts cmd with a new pseudo-terminal as its
// controlling terminal and stdin, stdout and stderr.
func startOnTerminal(t *testing.T, cmd *exec.Cmd) *terminal {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { _ = ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pseudo-terminal number: %v", err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pseudo-terminal: %v", err)
	}
	defer func() { _ = pts.Close() }()
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatalf("terminal size: %v", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	term := &terminal{ptm: ptm, cmd: cmd, done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(&term.out, ptm) }()
	go func() { term.done <- cmd.Wait() }()
	return term
}

// typeUntil types line (and a carriage return) every two seconds until
// the terminal shows want, or timeout passes.
func (term *terminal) typeUntil(line, want string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := term.ptm.WriteString(line + "\r"); err != nil {
			return false
		}
		for range 20 {
			if strings.Contains(term.out.String(), want) {
				return true
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return false
}

// wait waits for the command to exit, for at most timeout.
func (term *terminal) wait(timeout time.Duration) error {
	select {
	case err := <-term.done:
		return err
	case <-time.After(timeout):
		_ = term.cmd.Process.Kill()
		return fmt.Errorf("did not exit within %s (killed: %w)", timeout, <-term.done)
	}
}
