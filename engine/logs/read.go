package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultPollInterval is how often a follower looks for new output.
const DefaultPollInterval = 100 * time.Millisecond

// Options select what Read returns. The zero value reads the whole file
// once.
type Options struct {
	// TailLines keeps only the last N lines of the file (before following);
	// all when nil.
	TailLines *int64
	// SinceTime drops lines that started before it; none when zero.
	SinceTime time.Time
	// LimitBytes stops after that many bytes of content; no limit when nil.
	LimitBytes *int64
	// Follow continues with the lines written after the end of the file,
	// across rotation and restarts of the container (see the package
	// documentation), until ctx ends or Finished reports true.
	Follow bool
	// PollInterval is how often a follower looks for new output. Default
	// DefaultPollInterval.
	PollInterval time.Duration
	// NextPath returns the log file of the container instance that follows
	// the one writing current, if there is one yet. Default
	// nextInstancePath.
	NextPath func(current string) (next string, ok bool)
	// Finished, when set, is asked at the end of the current file when
	// there is no next instance: true means the container will write no more
	// output, and Read returns once it has read what is left.
	Finished func() bool
}

// errLimit stops a read at LimitBytes.
var errLimit = errors.New("limit reached")

// sink applies SinceTime and LimitBytes to lines on their way out.
type sink struct {
	since   time.Time
	limited bool
	left    int64
	emit    func(Line) error
}

func (s *sink) put(l Line) error {
	if !s.since.IsZero() && l.Time.Before(s.since) {
		return nil
	}
	if s.limited {
		if int64(len(l.Content)) > s.left {
			l.Content = l.Content[:s.left]
		}
		s.left -= int64(len(l.Content))
	}
	if err := s.emit(l); err != nil {
		return err
	}
	if s.limited && s.left <= 0 {
		return errLimit
	}
	return nil
}

// Read reads the CRI log file at path and calls emit with each line, in
// the order written; an error from emit ends Read with that error. Without
// Follow it returns at the end of the file; with Follow it continues as
// the package documentation describes. Read fails with an error wrapping
// fs.ErrNotExist when path does not exist and ErrMalformed for a line not
// in CRI format.
func Read(ctx context.Context, path string, opts Options, emit func(Line) error) error {
	return read(ctx, path, opts, emit, tailChunk)
}

// read is Read with the chunk size of tailStarts.
func read(ctx context.Context, path string, opts Options, emit func(Line) error, chunk int) error {
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.NextPath == nil {
		opts.NextPath = nextInstancePath
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	out := &sink{since: opts.SinceTime, emit: emit}
	if opts.LimitBytes != nil {
		out.limited, out.left = true, *opts.LimitBytes
		if out.left <= 0 {
			_ = f.Close()
			return nil
		}
	}
	r := &reader{opts: opts, out: out, path: path, f: f, lr: newLineReader(f, 0)}
	defer func() { _ = r.f.Close() }()
	if opts.TailLines != nil {
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		if r.starts, err = tailStarts(f, fi.Size(), max(*opts.TailLines, 0), opts.Follow, chunk); err != nil {
			return fmt.Errorf("read log %s: %w", path, err)
		}
		if err := r.lr.seek(min(r.starts[0], r.starts[1])); err != nil {
			return fmt.Errorf("read log %s: %w", path, err)
		}
	}
	err = r.run(ctx)
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// reader reads one follow session: the current file and what it carries
// over to the next.
type reader struct {
	opts   Options
	out    *sink
	asm    assembler
	path   string
	f      *os.File
	lr     *lineReader
	starts [2]int64 // per stream, raw lines before it are skipped (tail)
}

func (r *reader) run(ctx context.Context) error {
	for {
		if err := r.drain(ctx); err != nil {
			return err
		}
		if !r.opts.Follow {
			if err := r.lastLine(); err != nil {
				return err
			}
			return r.asm.flush(r.out.put)
		}
		switched, err := r.reopenIfRotated(ctx)
		if err != nil {
			return err
		}
		if switched {
			continue
		}
		if next, ok := r.opts.NextPath(r.path); ok {
			if err := r.nextInstance(ctx, next); err != nil {
				return err
			}
			continue
		}
		if r.opts.Finished != nil && r.opts.Finished() {
			if err := r.drain(ctx); err != nil {
				return err
			}
			return r.asm.flush(r.out.put)
		}
		if err := wait(ctx, r.opts.PollInterval); err != nil {
			return err
		}
	}
}

// drain handles every complete line up to the end of the current file.
func (r *reader) drain(ctx context.Context) error {
	for n := 0; ; n++ {
		if n%1024 == 1023 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, off, err := r.lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read log %s: %w", r.path, err)
		}
		if err := r.handle(line, off); err != nil {
			return err
		}
	}
}

func (r *reader) handle(line []byte, off int64) error {
	raw, err := parseRaw(line)
	if err != nil {
		return fmt.Errorf("read log %s: line at offset %d: %w: %w", r.path, off, ErrMalformed, err)
	}
	if off < r.starts[streamIndex(raw.stream)] {
		return nil
	}
	return r.asm.add(raw, r.out.put)
}

// lastLine handles the bytes after the last newline, a line still being
// written, if they parse.
func (r *reader) lastLine() error {
	line, off := r.lr.rest()
	if len(line) == 0 {
		return nil
	}
	if _, err := parseRaw(line); err != nil {
		return nil
	}
	return r.handle(line, off)
}

// reopenIfRotated switches to a new file at r.path, after draining the
// old one, or starts over when the file was truncated.
func (r *reader) reopenIfRotated(ctx context.Context) (bool, error) {
	fi, err := os.Stat(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // renamed, and the new file is yet to come
	}
	if err != nil {
		return false, fmt.Errorf("read log: %w", err)
	}
	cur, err := r.f.Stat()
	if err != nil {
		return false, fmt.Errorf("read log: %w", err)
	}
	if os.SameFile(fi, cur) {
		if cur.Size() >= r.lr.consumed() {
			return false, nil
		}
		// Truncated in place: what is there now is new.
		r.starts = [2]int64{}
		return true, r.lr.seek(0)
	}
	if err := r.drain(ctx); err != nil {
		return false, err
	}
	nf, err := os.Open(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read log: %w", err)
	}
	r.replace(r.path, nf)
	return true, nil
}

// nextInstance drains the current file, ends the lines it left unfinished
// and continues with the next instance's file.
func (r *reader) nextInstance(ctx context.Context, next string) error {
	if err := r.drain(ctx); err != nil {
		return err
	}
	if err := r.lastLine(); err != nil {
		return err
	}
	if err := r.asm.flush(r.out.put); err != nil {
		return err
	}
	nf, err := os.Open(next)
	if err != nil {
		return fmt.Errorf("read log of the next instance: %w", err)
	}
	r.replace(next, nf)
	return nil
}

func (r *reader) replace(path string, f *os.File) {
	_ = r.f.Close()
	r.path, r.f, r.lr, r.starts = path, f, newLineReader(f, 0), [2]int64{}
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// lineReader reads the raw lines of a file that may grow.
type lineReader struct {
	f    *os.File
	br   *bufio.Reader
	off  int64  // offset of the first byte not returned in a line
	pend []byte // the bytes from off, which end in no newline yet
	line []byte // the line last returned
}

func newLineReader(f *os.File, off int64) *lineReader {
	return &lineReader{f: f, br: bufio.NewReaderSize(f, 64<<10), off: off}
}

func (lr *lineReader) seek(off int64) error {
	if _, err := lr.f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	lr.br.Reset(lr.f)
	lr.off, lr.pend = off, lr.pend[:0]
	return nil
}

// next returns the next complete line, without its newline, and its
// offset; the line is valid until the next call. At the end of the file
// it returns io.EOF and keeps the bytes of an incomplete line for later.
func (lr *lineReader) next() ([]byte, int64, error) {
	for {
		chunk, err := lr.br.ReadSlice('\n')
		lr.pend = append(lr.pend, chunk...)
		switch {
		case err == nil:
			off := lr.off
			lr.line = append(lr.line[:0], lr.pend[:len(lr.pend)-1]...)
			lr.off += int64(len(lr.pend))
			lr.pend = lr.pend[:0]
			return lr.line, off, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(lr.pend) > maxRawLineBytes {
				return nil, 0, fmt.Errorf("line at offset %d: %w: longer than %d bytes", lr.off, ErrMalformed, maxRawLineBytes)
			}
		default:
			return nil, 0, err
		}
	}
}

// rest returns the bytes of the incomplete last line and their offset.
func (lr *lineReader) rest() ([]byte, int64) { return lr.pend, lr.off }

// consumed is how far into the file the reader has read.
func (lr *lineReader) consumed() int64 { return lr.off + int64(len(lr.pend)) }

// nextInstancePath returns the log file of the container instance after
// the one that writes path, following the kubelet's layout
// <container>/<restartCount>.log: the existing <m>.log in the same
// directory with the smallest m greater than path's. It returns false when
// path is not laid out so or there is no such file.
func nextInstancePath(path string) (string, bool) {
	dir, base := filepath.Split(path)
	n, ok := instanceNumber(base)
	if !ok {
		return "", false
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	best := -1
	for _, e := range entries {
		m, ok := instanceNumber(e.Name())
		if ok && m > n && (best < 0 || m < best) && e.Type().IsRegular() {
			best = m
		}
	}
	if best < 0 {
		return "", false
	}
	return filepath.Join(dir, strconv.Itoa(best)+".log"), true
}

// instanceNumber parses "<n>.log".
func instanceNumber(base string) (int, bool) {
	digits, ok := strings.CutSuffix(base, ".log")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

// TailLines returns the last n lines of the CRI log file at path, keeping
// at most maxBytes of content (no limit when maxBytes <= 0): the newest
// lines that fit, or the end of the last line when it alone is longer. It
// is the log tail RunPods reports for a failed container.
func TailLines(ctx context.Context, path string, n int64, maxBytes int) ([]Line, error) {
	var lines []Line
	err := Read(ctx, path, Options{TailLines: &n}, func(l Line) error {
		lines = append(lines, l)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if maxBytes <= 0 {
		return lines, nil
	}
	total, i := 0, len(lines)
	for i > 0 && total+len(lines[i-1].Content) <= maxBytes {
		total += len(lines[i-1].Content)
		i--
	}
	if i == len(lines) && i > 0 {
		last := lines[i-1]
		last.Content = last.Content[len(last.Content)-maxBytes:]
		return []Line{last}, nil
	}
	return lines[i:], nil
}
