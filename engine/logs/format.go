package logs

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Stream is the output stream of a line.
type Stream string

// Streams, as CRI writes them.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// maxLineBytes bounds the joining of partial lines: once the parts of a
// line reach it, they are emitted as a line of their own and the rest of
// the line starts a new one.
const maxLineBytes = 1 << 20

// maxRawLineBytes bounds one line of the file; a longer one is malformed.
// Runtimes split output lines at 16 KiB by default.
const maxRawLineBytes = 16 << 20

// ErrMalformed reports a line of a log file that is not in CRI format.
var ErrMalformed = errors.New("malformed CRI log line")

// Line is one line of a container's output.
type Line struct {
	// Time the runtime recorded the line (its first part, if it was split).
	Time time.Time
	// Stream the line was written to.
	Stream Stream
	// Content of the line, without its newline. It belongs to the receiver.
	Content []byte
}

// rawLine is one parsed line of a CRI log file. content aliases the
// buffer it was parsed from.
type rawLine struct {
	time    time.Time
	stream  Stream
	partial bool
	content []byte
}

// parseRaw parses one line of a CRI log file, without its newline, as the
// kubelet's parseCRILog does.
func parseRaw(b []byte) (rawLine, error) {
	var r rawLine
	ts, rest, ok := bytes.Cut(b, []byte{' '})
	if !ok {
		return r, errors.New("no timestamp")
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return r, fmt.Errorf("timestamp %q is not RFC 3339", ts)
	}
	r.time = t
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return r, errors.New("no stream")
	}
	switch Stream(stream) {
	case Stdout, Stderr:
		r.stream = Stream(stream)
	default:
		return r, fmt.Errorf("unknown stream %q", stream)
	}
	// An empty line may be written without the space after its tag.
	tag, content, _ := bytes.Cut(rest, []byte{' '})
	if len(tag) == 0 {
		return r, errors.New("no tag")
	}
	first, _, _ := bytes.Cut(tag, []byte{':'})
	r.partial = string(first) == "P"
	r.content = content
	return r, nil
}

func streamIndex(s Stream) int {
	if s == Stderr {
		return 1
	}
	return 0
}

var streams = [2]Stream{Stdout, Stderr}

// assembler joins partial lines, per stream.
type assembler struct {
	open [2]bool
	time [2]time.Time
	buf  [2][]byte
}

// add adds a raw line, emitting the line it completes.
func (a *assembler) add(r rawLine, emit func(Line) error) error {
	i := streamIndex(r.stream)
	if !a.open[i] {
		a.open[i], a.time[i], a.buf[i] = true, r.time, a.buf[i][:0]
	}
	a.buf[i] = append(a.buf[i], r.content...)
	if r.partial && len(a.buf[i]) < maxLineBytes {
		return nil
	}
	return a.end(i, emit)
}

// end emits the open line of stream i, if any.
func (a *assembler) end(i int, emit func(Line) error) error {
	if !a.open[i] {
		return nil
	}
	a.open[i] = false
	return emit(Line{Time: a.time[i], Stream: streams[i], Content: bytes.Clone(a.buf[i])})
}

// flush emits the lines left unfinished, the one started first first.
func (a *assembler) flush(emit func(Line) error) error {
	first, second := 0, 1
	if a.open[1] && (!a.open[0] || a.time[1].Before(a.time[0])) {
		first, second = 1, 0
	}
	if err := a.end(first, emit); err != nil {
		return err
	}
	return a.end(second, emit)
}
