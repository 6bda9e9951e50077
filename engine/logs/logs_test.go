package logs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

// raw is one line of a CRI log file.
type raw struct {
	sec     int // seconds after t0
	stream  Stream
	tag     string
	content string
}

func (r raw) String() string {
	return fmt.Sprintf("%s %s %s %s\n", t0.Add(time.Duration(r.sec)*time.Second).Format(time.RFC3339Nano), r.stream, r.tag, r.content)
}

func out(sec int, content string) raw { return raw{sec, Stdout, "F", content} }
func errl(sec int, content string) raw {
	return raw{sec, Stderr, "F", content}
}
func part(sec int, stream Stream, content string) raw { return raw{sec, stream, "P", content} }

func appendRaw(t *testing.T, path string, lines ...raw) {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.String())
	}
	appendText(t, path, b.String())
}

func appendText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// line is what a test expects of a Line.
type line struct {
	Sec     int
	Stream  Stream
	Content string
}

func toLines(ls []Line) []line {
	out := make([]line, 0, len(ls))
	for _, l := range ls {
		out = append(out, line{int(l.Time.Sub(t0) / time.Second), l.Stream, string(l.Content)})
	}
	return out
}

func readAll(t *testing.T, path string, opts Options) ([]line, error) {
	t.Helper()
	return readChunk(t, path, opts, tailChunk)
}

func readChunk(t *testing.T, path string, opts Options, chunk int) ([]line, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []Line
	err := read(ctx, path, opts, func(l Line) error {
		got = append(got, l)
		return nil
	}, chunk)
	return toLines(got), err
}

func ptr[T any](v T) *T { return &v }

func TestParseRaw(t *testing.T) {
	ts := t0.Format(time.RFC3339Nano)
	tests := []struct {
		name    string
		in      string
		want    rawLine
		wantErr string
	}{
		{name: "full", in: ts + " stdout F hello world", want: rawLine{t0, Stdout, false, []byte("hello world")}},
		{name: "partial", in: ts + " stderr P part", want: rawLine{t0, Stderr, true, []byte("part")}},
		{name: "more tags", in: ts + " stdout P:x:y a", want: rawLine{t0, Stdout, true, []byte("a")}},
		{name: "unknown tag is full", in: ts + " stdout Z a", want: rawLine{t0, Stdout, false, []byte("a")}},
		{name: "empty content", in: ts + " stdout F ", want: rawLine{t0, Stdout, false, []byte{}}},
		{name: "empty content without space", in: ts + " stdout F", want: rawLine{t0, Stdout, false, nil}},
		{name: "spaces kept", in: ts + " stdout F  two  spaces ", want: rawLine{t0, Stdout, false, []byte(" two  spaces ")}},
		{name: "no timestamp", in: "garbage", wantErr: "no timestamp"},
		{name: "bad timestamp", in: "yesterday stdout F x", wantErr: "not RFC 3339"},
		{name: "no stream", in: ts, wantErr: "no timestamp"},
		{name: "stream only", in: ts + " stdout", wantErr: "no stream"},
		{name: "unknown stream", in: ts + " stdin F x", wantErr: "unknown stream"},
		{name: "no tag", in: ts + " stdout  x", wantErr: "no tag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRaw([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseRaw(%q) = %v, want error %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseRaw(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(rawLine{})); diff != "" {
				t.Errorf("parseRaw(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// interleaved has partial lines of both streams mixed, and ends with an
// unfinished stdout line.
var interleaved = []raw{
	out(0, "one"),
	part(1, Stdout, "tw"),
	errl(2, "e1"),
	part(3, Stderr, "e"),
	part(4, Stdout, "o"),
	errl(5, "2"),
	out(6, ""),
	out(7, "three"),
	part(8, Stderr, "e3"),
	part(9, Stderr, "-"),
	errl(10, "end"),
	part(11, Stdout, "unfin"),
	part(12, Stdout, "ished"),
}

// interleavedLines are the lines of interleaved in completion order; the
// unfinished one comes last.
var interleavedLines = []line{
	{0, Stdout, "one"},
	{2, Stderr, "e1"},
	{3, Stderr, "e2"},
	{1, Stdout, "two"},
	{7, Stdout, "three"},
	{8, Stderr, "e3-end"},
	{11, Stdout, "unfinished"},
}

func TestReadJoinsPartialLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, interleaved...)
	got, err := readAll(t, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(interleavedLines, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
}

func TestReadMalformed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, out(0, "a"))
	appendText(t, path, "not a cri line\n")
	appendRaw(t, path, out(1, "b"), out(2, "c"))
	got, err := readAll(t, path, Options{})
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", len(out(0, "a").String()))) {
		t.Errorf("Read: %v, want ErrMalformed naming %s and the line's offset", err, path)
	}
	if diff := cmp.Diff([]line{{0, Stdout, "a"}}, got); diff != "" {
		t.Errorf("lines before the error (-want +got):\n%s", diff)
	}
	if _, err := readAll(t, path, Options{TailLines: ptr[int64](5)}); !errors.Is(err, ErrMalformed) {
		t.Errorf("tail over the malformed line: %v, want ErrMalformed", err)
	}
	// A tail that ends after it does not read it. (The line before the
	// tail is read too: its tag says whether the tail's first line has
	// parts before it.)
	got, err = readAll(t, path, Options{TailLines: ptr[int64](1)})
	if err != nil {
		t.Fatalf("tail after the malformed line: %v", err)
	}
	if diff := cmp.Diff([]line{{2, Stdout, "c"}}, got); diff != "" {
		t.Errorf("tail (-want +got):\n%s", diff)
	}
}

func TestReadLastLineBeingWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, out(0, "a"))
	appendText(t, path, strings.TrimSuffix(out(1, "b").String(), "\n"))
	got, err := readAll(t, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]line{{0, Stdout, "a"}, {1, Stdout, "b"}}, got); diff != "" {
		t.Errorf("complete last line without newline (-want +got):\n%s", diff)
	}
	appendText(t, path, "\n"+t0.Format(time.RFC3339Nano)+" std")
	got, err = readAll(t, path, Options{})
	if err != nil {
		t.Fatalf("a half-written last line is an error: %v", err)
	}
	if len(got) != 2 {
		t.Errorf("half-written last line: got %v", got)
	}
}

func TestLongLineIsEmittedInPieces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	piece := strings.Repeat("x", maxLineBytes/3+1)
	appendRaw(t, path, part(0, Stdout, piece), part(1, Stdout, piece), errl(2, "between"), part(3, Stdout, piece), part(4, Stdout, piece), out(5, "end"))
	got, err := readAll(t, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []line{{2, Stderr, "between"}, {0, Stdout, strings.Repeat(piece, 3)}, {4, Stdout, piece + "end"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
}

func TestReadMissingFile(t *testing.T) {
	_, err := readAll(t, filepath.Join(t.TempDir(), "nope.log"), Options{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read: %v, want fs.ErrNotExist", err)
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, interleaved...)
	// Only complete lines count when following: the unfinished line is
	// read whole but not yet emitted.
	complete := interleavedLines[:len(interleavedLines)-1]
	for _, chunk := range []int{1, 7, 64, tailChunk} {
		for n := range len(interleavedLines) + 2 {
			t.Run(fmt.Sprintf("chunk %d tail %d", chunk, n), func(t *testing.T) {
				got, err := readChunk(t, path, Options{TailLines: ptr(int64(n))}, chunk)
				if err != nil {
					t.Fatal(err)
				}
				want := interleavedLines[max(0, len(interleavedLines)-n):]
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("tail (-want +got):\n%s", diff)
				}

				// Following, the unfinished line does not count; end the
				// read at once with Finished.
				got, err = readChunk(t, path, Options{TailLines: ptr(int64(n)), Follow: true, Finished: func() bool { return true }}, chunk)
				if err != nil {
					t.Fatal(err)
				}
				want = append(complete[max(0, len(complete)-n):len(complete):len(complete)], interleavedLines[len(interleavedLines)-1])
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("tail and follow (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestTailReadsOnlyTheEnd: a tail of a big file does not read its head
// (here a head that is not even CRI format).
func TestTailReadsOnlyTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendText(t, path, strings.Repeat("x", 4<<20)+"\n")
	var lines []raw
	for i := range 1000 {
		lines = append(lines, out(i, fmt.Sprint("line ", i)))
	}
	appendRaw(t, path, lines...)
	got, err := readAll(t, path, Options{TailLines: ptr[int64](3)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]line{{997, Stdout, "line 997"}, {998, Stdout, "line 998"}, {999, Stdout, "line 999"}}, got); diff != "" {
		t.Errorf("tail (-want +got):\n%s", diff)
	}
}

func TestSince(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, out(0, "a"), part(1, Stdout, "b"), out(2, "c"), errl(3, "d"), out(4, "e"))
	got, err := readAll(t, path, Options{SinceTime: t0.Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	// "bc" started before the since time.
	if diff := cmp.Diff([]line{{3, Stderr, "d"}, {4, Stdout, "e"}}, got); diff != "" {
		t.Errorf("since (-want +got):\n%s", diff)
	}
	// Tail first, then since, as the kubelet.
	got, err = readAll(t, path, Options{SinceTime: t0.Add(4 * time.Second), TailLines: ptr[int64](3)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]line{{4, Stdout, "e"}}, got); diff != "" {
		t.Errorf("tail and since (-want +got):\n%s", diff)
	}
}

func TestLimitBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, out(0, "abc"), out(1, "defg"), out(2, "hi"))
	tests := []struct {
		limit int64
		want  []line
	}{
		{0, nil},
		{2, []line{{0, Stdout, "ab"}}},
		{3, []line{{0, Stdout, "abc"}}},
		{5, []line{{0, Stdout, "abc"}, {1, Stdout, "de"}}},
		{100, []line{{0, Stdout, "abc"}, {1, Stdout, "defg"}, {2, Stdout, "hi"}}},
	}
	for _, tt := range tests {
		got, err := readAll(t, path, Options{LimitBytes: &tt.limit})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("limit %d (-want +got):\n%s", tt.limit, diff)
		}
	}
}

func TestEmitErrorEndsRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, out(0, "a"), out(1, "b"))
	stop := errors.New("stop")
	n := 0
	err := Read(t.Context(), path, Options{}, func(Line) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("Read: %v after %d lines, want the emit error after 1", err, n)
	}
}

func TestTailLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, out(0, "aaaa"), out(1, "bbbb"), out(2, "cccc"), out(3, "dddddddd"))
	tests := []struct {
		n        int64
		maxBytes int
		want     []line
	}{
		{2, 0, []line{{2, Stdout, "cccc"}, {3, Stdout, "dddddddd"}}},
		{3, 12, []line{{2, Stdout, "cccc"}, {3, Stdout, "dddddddd"}}},
		{3, 100, []line{{1, Stdout, "bbbb"}, {2, Stdout, "cccc"}, {3, Stdout, "dddddddd"}}},
		{3, 5, []line{{3, Stdout, "ddddd"}}},
		{0, 10, nil},
	}
	for _, tt := range tests {
		got, err := TailLines(t.Context(), path, tt.n, tt.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, toLines(got), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("TailLines(%d, %d) (-want +got):\n%s", tt.n, tt.maxBytes, diff)
		}
	}
	if _, err := TailLines(t.Context(), filepath.Join(t.TempDir(), "nope"), 1, 1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("TailLines of a missing file: %v", err)
	}
}

func TestNextInstancePath(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"0.log", "1.log", "3.log", "12.log", "0.log.20260102-030405", "1.log.20260102-030405.gz", "x.log", "+4.log"} {
		appendText(t, filepath.Join(dir, name), "")
	}
	if err := os.Mkdir(filepath.Join(dir, "2.log"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		from string
		want string
	}{
		{"0.log", "1.log"},
		{"1.log", "3.log"},
		{"2.log", "3.log"},
		{"3.log", "12.log"},
		{"12.log", ""},
		{"x.log", ""},
		{"0.log.20260102-030405", ""},
	}
	for _, tt := range tests {
		got, ok := nextInstancePath(filepath.Join(dir, tt.from))
		want := ""
		if tt.want != "" {
			want = filepath.Join(dir, tt.want)
		}
		if got != want || ok != (tt.want != "") {
			t.Errorf("NextInstancePath(%s) = %q, %t, want %q", tt.from, got, ok, want)
		}
	}
}

// TestTailMatchesModel compares tails of random files, with both streams'
// partial lines interleaved, against a model: the last n lines by the
// position of their last part, complete ones in that order, then the
// unfinished ones in the order they started.
func TestTailMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for iter := range 200 {
		var raws []raw
		for i := range rng.IntN(30) {
			stream := Stdout
			if rng.IntN(3) == 0 {
				stream = Stderr
			}
			tag := "F"
			if rng.IntN(2) == 0 {
				tag = "P"
			}
			raws = append(raws, raw{i, stream, tag, strings.Repeat(string(rune('a'+i%26)), rng.IntN(5))})
		}
		path := filepath.Join(dir, fmt.Sprint(iter, ".log"))
		appendRaw(t, path, raws...)

		type mline struct {
			line
			end int
		}
		var complete []mline
		open := map[Stream]*mline{}
		for i, r := range raws {
			m := open[r.stream]
			if m == nil {
				m = &mline{line: line{r.sec, r.stream, ""}}
				open[r.stream] = m
			}
			m.Content += r.content
			m.end = i
			if r.tag == "F" {
				complete = append(complete, *m)
				delete(open, r.stream)
			}
		}
		var unfinished []mline
		for _, s := range []Stream{Stdout, Stderr} {
			if m := open[s]; m != nil {
				unfinished = append(unfinished, *m)
			}
		}
		slices.SortFunc(unfinished, func(a, b mline) int { return a.Sec - b.Sec })
		for n := range len(raws) + 2 {
			var ends []int
			for _, m := range append(slices.Clone(complete), unfinished...) {
				ends = append(ends, m.end)
			}
			slices.Sort(ends)
			cut := -1
			if n > 0 && n <= len(ends) {
				cut = ends[len(ends)-n]
			} else if n == 0 {
				cut = len(raws)
			}
			var want []line
			for _, group := range [][]mline{complete, unfinished} {
				for _, m := range group {
					if m.end >= cut {
						want = append(want, m.line)
					}
				}
			}
			chunk := 1 + rng.IntN(100)
			got, err := readChunk(t, path, Options{TailLines: ptr(int64(n))}, chunk)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("file %d %v, tail %d, chunk %d (-want +got):\n%s", iter, raws, n, chunk, diff)
			}
		}
	}
}
