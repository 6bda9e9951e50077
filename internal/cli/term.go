package cli

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// palette colours words of the progress output. Its zero value (used
// whenever stdout is not a terminal, NO_COLOR is set or TERM is dumb)
// leaves them as they are.
type palette struct{ on bool }

func newPalette(w io.Writer, getenv func(string) string) palette {
	return palette{on: isTerminal(w) && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"}
}

func (p palette) paint(code, s string) string {
	if !p.on || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (p palette) good(s string) string { return p.paint("32", s) }
func (p palette) bad(s string) string  { return p.paint("31", s) }
func (p palette) warn(s string) string { return p.paint("33", s) }
func (p palette) dim(s string) string  { return p.paint("2", s) }
func (p palette) bold(s string) string { return p.paint("1", s) }
