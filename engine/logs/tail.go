package logs

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// tailChunk is how much tailStarts reads at a time, going backwards.
const tailChunk = 32 << 10

// tailStarts finds the last n lines of f (of size bytes) by reading it
// backwards, chunk bytes at a time. It returns, per stream, the offset of
// the first raw line that belongs to them: the lines of one stream that
// are kept form a suffix of that stream's raw lines, so a forward read
// from the smaller offset that skips each stream's raw lines before its
// own offset yields exactly the wanted lines.
//
// Lines are counted by their F part. A stream whose last raw line is P has
// an unfinished line: when following, it is kept without being counted
// (its end is yet to come); otherwise it counts as a line. The bytes after
// the last newline, a raw line being written, are left to the forward
// read when following; otherwise, if they parse, they count as the last
// raw line (the forward read emits them), so that a tail never holds a
// fragment of a line whose first parts it left out.
func tailStarts(f *os.File, size, n int64, follow bool, chunk int) ([2]int64, error) {
	// seg holds the bytes [pos, end) of the file not yet split into lines.
	seg, pos, end, err := lastLineEnd(f, size, follow, chunk)
	if err != nil {
		return [2]int64{}, err
	}
	if end == 0 {
		return [2]int64{0, 0}, nil // no line
	}
	starts := [2]int64{end, end}

	var (
		count   int64
		seen    [2]bool
		pending [2]bool // the stream's earlier P parts belong to a kept line
	)
	for end > 0 {
		body := seg[:len(seg)-1] // without the line's newline
		i := bytes.LastIndexByte(body, '\n')
		for i < 0 && pos > 0 {
			if len(body) > maxRawLineBytes {
				return [2]int64{}, fmt.Errorf("line before offset %d: %w: longer than %d bytes", end, ErrMalformed, maxRawLineBytes)
			}
			if seg, pos, err = readBefore(f, seg, pos, max(chunk, len(seg))); err != nil {
				return [2]int64{}, err
			}
			body = seg[:len(seg)-1]
			i = bytes.LastIndexByte(body, '\n')
		}
		off := pos + int64(i) + 1
		r, err := parseRaw(body[i+1:])
		if err != nil {
			return [2]int64{}, fmt.Errorf("line at offset %d: %w: %w", off, ErrMalformed, err)
		}
		s := streamIndex(r.stream)
		switch {
		case !r.partial || !seen[s] && !follow:
			// The end of a line, or a stream's unfinished last line.
			if count < n {
				count++
				pending[s] = true
				starts[s] = off
			} else {
				pending[s] = false
			}
		case !seen[s]: // following: the unfinished line is kept whole
			pending[s] = true
			starts[s] = off
		case pending[s]:
			starts[s] = off
		}
		seen[s] = true
		seg, end = seg[:i+1], off
		if count >= n && !pending[0] && !pending[1] {
			break
		}
	}
	return starts, nil
}

// lastLineEnd finds the end of the last complete raw line of f (of size
// bytes) by reading it backwards, chunk bytes at a time: the offset after
// its newline, 0 when f holds no line. When not following, the bytes after
// the last newline, if they parse, are the last raw line, ending at a
// virtual newline at offset size (so end is size+1). It returns end and
// seg, the bytes [pos, end) read so far, which end with that newline.
func lastLineEnd(f *os.File, size int64, follow bool, chunk int) (seg []byte, pos, end int64, err error) {
	pos = size
	end = -1
	var trailing []byte // the bytes after the last newline
	for end < 0 && pos > 0 {
		if len(seg) > maxRawLineBytes {
			return nil, 0, 0, fmt.Errorf("no newline in the last %d bytes: %w: a line longer than %d bytes", len(seg), ErrMalformed, maxRawLineBytes)
		}
		if seg, pos, err = readBefore(f, seg, pos, max(chunk, len(seg))); err != nil {
			return nil, 0, 0, err
		}
		if i := bytes.LastIndexByte(seg, '\n'); i >= 0 {
			end = pos + int64(i) + 1
			seg, trailing = seg[:i+1], bytes.Clone(seg[i+1:])
		}
	}
	if end < 0 { // no newline: seg is the whole file
		end, seg, trailing = 0, nil, seg
	}
	if !follow && len(trailing) > 0 {
		if _, err := parseRaw(trailing); err == nil {
			// A reader that does not follow emits the line being written
			// if it parses, so it counts as the file's last raw line; its
			// newline is virtual, at offset size.
			seg = append(append(seg, trailing...), '\n')
			end = size + 1
		}
	}
	return seg, pos, end, nil
}

// readBefore reads up to chunk bytes before pos and prepends them to seg.
// Callers that need more of a line pass at least len(seg), so a line read
// backwards costs time linear in its length, not quadratic.
func readBefore(f *os.File, seg []byte, pos int64, chunk int) ([]byte, int64, error) {
	n := int64(chunk)
	if pos < n {
		n = pos
	}
	buf := make([]byte, int(n)+len(seg))
	if _, err := f.ReadAt(buf[:n], pos-n); err != nil && err != io.EOF {
		return nil, 0, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	copy(buf[n:], seg)
	return buf, pos - n, nil
}
