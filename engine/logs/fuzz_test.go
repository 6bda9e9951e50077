package logs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// encodeRaw writes r back in CRI format, with a canonical tag.
func encodeRaw(r rawLine) []byte {
	tag := "F"
	if r.partial {
		tag = "P"
	}
	var b bytes.Buffer
	b.WriteString(r.time.Format(time.RFC3339Nano))
	b.WriteByte(' ')
	b.WriteString(string(r.stream))
	b.WriteByte(' ')
	b.WriteString(tag)
	b.WriteByte(' ')
	b.Write(r.content)
	return b.Bytes()
}

// FuzzParseLine parses arbitrary bytes as one line of a CRI log file. It
// never panics, and a line that parses, written back in CRI format,
// parses to the same time, stream, partial flag and content.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"2016-10-06T00:17:09.669794202Z stdout F log content",
		"2016-10-06T00:17:09.669794202Z stderr P part",
		"2016-10-06T00:17:09.669794202+02:00 stdout F",
		"2016-10-06T00:17:09Z stdout F:x:y  two  spaces ",
		"2016-10-06T00:17:09.669794202Z stdin F nope",
		"not a timestamp stdout F x",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseRaw(line)
		if err != nil {
			return
		}
		enc := encodeRaw(r)
		again, err := parseRaw(enc)
		if err != nil {
			t.Fatalf("%q parsed, its encoding %q does not: %v", line, enc, err)
		}
		if !again.time.Equal(r.time) || again.stream != r.stream || again.partial != r.partial || !bytes.Equal(again.content, r.content) {
			t.Fatalf("%q parsed to %+v, its encoding %q to %+v", line, r, enc, again)
		}
	})
}

// FuzzRead reads arbitrary bytes as a CRI log file, whole and with tail
// and limit options, and with the backwards reading of tail in chunks of
// any size. It never panics and fails only with ErrMalformed. What it
// reads matches a model of the format (TestTailMatchesModel's): complete
// lines in the order of their last part, then unfinished ones in the
// order they started; a tail keeps the lines whose last part is among the
// last n lines' (inputs here are far below MaxLineBytes, so no line is
// cut in pieces); a limit cuts the content at that many bytes.
func FuzzRead(f *testing.F) {
	valid := "2026-01-02T03:04:05.000000001Z stdout F one\n" +
		"2026-01-02T03:04:06Z stderr P par\n" +
		"2026-01-02T03:04:07Z stdout F two\n" +
		"2026-01-02T03:04:08Z stderr F tial\n" +
		"2026-01-02T03:04:09Z stdout P unfinished"
	f.Add([]byte(valid), uint8(2), uint8(3), int16(5))
	f.Add([]byte(valid+"\n"), uint8(0), uint8(1), int16(-1))
	f.Add([]byte("2026-01-02T03:04:05Z stdout F a\nbroken\n"), uint8(1), uint8(7), int16(0))
	f.Add([]byte("\n\n2026-01-02T03:04:05Z stdout F\n"), uint8(5), uint8(2), int16(100))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, tail, chunk uint8, limit int16) {
		if len(data) > maxLineBytes/2 {
			return
		}
		path := filepath.Join(dir, "0.log")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		readWith := func(opts Options, chunk int) ([]Line, error) {
			var out []Line
			err := read(ctx, path, opts, func(l Line) error {
				out = append(out, l)
				return nil
			}, chunk)
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("Read(%+v): %v, want nil or ErrMalformed", opts, err)
			}
			return out, err
		}
		all, err := readWith(Options{}, tailChunk)
		raws, ok := modelRaws(data)
		if (err == nil) != ok {
			t.Fatalf("Read: %v, but the model says well-formed=%v", err, ok)
		}
		if err != nil {
			return
		}
		if want := modelTail(raws, -1); !slices.EqualFunc(all, want, sameLine) {
			t.Fatalf("Read = %s, model %s", show(all), show(want))
		}
		n := int64(tail % 8)
		want := modelTail(raws, int(n))
		for _, c := range []int{tailChunk, int(chunk%32) + 1} {
			tailed, err := readWith(Options{TailLines: &n}, c)
			if err != nil || !slices.EqualFunc(tailed, want, sameLine) {
				t.Fatalf("tail %d in chunks of %d = %s, %v; model %s (all %s)", n, c, show(tailed), err, show(want), show(all))
			}
		}
		if limit >= 0 {
			lb := int64(limit)
			limited, _ := readWith(Options{LimitBytes: &lb}, tailChunk)
			total := 0
			for _, l := range limited {
				total += len(l.Content)
			}
			whole := 0
			for _, l := range all {
				whole += len(l.Content)
			}
			if total != min(whole, int(lb)) {
				t.Fatalf("limit %d: %d bytes of %d", lb, total, whole)
			}
		}
	})
}

// modelRaws splits a file into raw lines: every line ended by a newline
// must parse, and the bytes after the last newline count when they do.
func modelRaws(data []byte) ([]rawLine, bool) {
	parts := bytes.Split(data, []byte{'\n'})
	var raws []rawLine
	for i, p := range parts {
		last := i == len(parts)-1
		if last && len(p) == 0 {
			break
		}
		r, err := parseRaw(p)
		if err != nil {
			if last {
				break // a line being written that does not parse yet
			}
			return nil, false
		}
		raws = append(raws, r)
	}
	return raws, true
}

// modelTail is the lines of raws a tail of n keeps (all when n < 0).
func modelTail(raws []rawLine, n int) []Line {
	type mline struct {
		l   Line
		end int
	}
	var complete []mline
	var open [2]*mline
	for i, r := range raws {
		s := streamIndex(r.stream)
		if open[s] == nil {
			open[s] = &mline{l: Line{Time: r.time, Stream: r.stream, Content: []byte{}}}
		}
		open[s].l.Content = append(open[s].l.Content, r.content...)
		open[s].end = i
		if !r.partial {
			complete = append(complete, *open[s])
			open[s] = nil
		}
	}
	var unfinished []mline
	for _, m := range open {
		if m != nil {
			unfinished = append(unfinished, *m)
		}
	}
	if len(unfinished) == 2 && unfinished[1].l.Time.Before(unfinished[0].l.Time) {
		unfinished[0], unfinished[1] = unfinished[1], unfinished[0]
	}
	lines := append(complete, unfinished...)
	cut := -1
	if n >= 0 {
		ends := make([]int, 0, len(lines))
		for _, m := range lines {
			ends = append(ends, m.end)
		}
		slices.Sort(ends)
		switch {
		case n == 0:
			cut = len(raws)
		case n <= len(ends):
			cut = ends[len(ends)-n]
		}
	}
	var out []Line
	for _, m := range lines {
		if m.end >= cut {
			out = append(out, m.l)
		}
	}
	return out
}

func sameLine(a, b Line) bool {
	return a.Time.Equal(b.Time) && a.Stream == b.Stream && bytes.Equal(a.Content, b.Content)
}

func show(ls []Line) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = string(l.Stream) + ":" + string(l.Content)
	}
	return "[" + strings.Join(parts, " | ") + "]"
}

// TestTailCountsTheLineBeingWritten: without Follow, the bytes after the
// last newline that parse count as the last raw line of a tail. A tail
// that leaves out a partial line therefore leaves out its continuation
// being written too, instead of emitting a fragment (found by FuzzRead),
// and a tail of n holds at most n lines.
func TestTailCountsTheLineBeingWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, out(0, "a"), part(1, Stderr, "first half "))
	appendText(t, path, strings.TrimSuffix(errl(2, "second half").String(), "\n"))
	for n, want := range map[int64][]line{
		0: nil,
		1: {{1, Stderr, "first half second half"}},
		2: {{0, Stdout, "a"}, {1, Stderr, "first half second half"}},
	} {
		got, err := readAll(t, path, Options{TailLines: ptr(n)})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("tail %d (-want +got):\n%s", n, diff)
		}
	}
}

// TestTailOfAFileWithoutNewline: a file whose end holds no newline for
// more than a raw line's bound is malformed, read whole or tailed, and
// either read stops at about that bound: the file here is a sparse 64 GiB
// of NUL bytes after one line, which a read without the bound would try
// to hold in memory.
func TestTailOfAFileWithoutNewline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, out(0, "a"))
	if err := os.Truncate(path, 64<<30); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{}, {TailLines: ptr(int64(1))}} {
		if _, err := readAll(t, path, opts); !errors.Is(err, ErrMalformed) {
			t.Errorf("Read(%+v): %v, want ErrMalformed", opts, err)
		}
	}
}
