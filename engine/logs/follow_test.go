package logs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testPoll = 5 * time.Millisecond

// follower runs Read with Follow in the background.
type follower struct {
	lines  chan Line
	done   chan error
	cancel context.CancelFunc
}

func startFollow(t *testing.T, path string, opts Options) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	f := &follower{lines: make(chan Line, 1000), done: make(chan error, 1), cancel: cancel}
	opts.Follow = true
	if opts.PollInterval == 0 {
		opts.PollInterval = testPoll
	}
	go func() {
		f.done <- Read(ctx, path, opts, func(l Line) error {
			f.lines <- l
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-f.done; err != nil {
			t.Logf("Read ended: %v", err)
		}
	})
	return f
}

// expect receives len(want) lines and compares them.
func (f *follower) expect(t *testing.T, want ...line) {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	var got []Line
	for len(got) < len(want) {
		select {
		case l := <-f.lines:
			got = append(got, l)
		case err := <-f.done:
			f.done <- err
			t.Fatalf("Read ended with %v after %v, want %v", err, toLines(got), want)
		case <-timeout.C:
			t.Fatalf("got %v, want %v", toLines(got), want)
		}
	}
	if diff := cmp.Diff(want, toLines(got)); diff != "" {
		t.Errorf("followed lines (-want +got):\n%s", diff)
	}
}

// end waits for Read to return and checks that no line is left.
func (f *follower) end(t *testing.T) error {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	var err error
	select {
	case err = <-f.done:
		f.done <- err
	case <-timeout.C:
		t.Fatal("Read did not return")
	}
	close(f.lines)
	var extra []Line
	for l := range f.lines {
		extra = append(extra, l)
	}
	if len(extra) > 0 {
		t.Errorf("unexpected lines %v", toLines(extra))
	}
	return err
}

func TestFollowAppendedLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, out(0, "older"), out(0, "old"))
	f := startFollow(t, path, Options{TailLines: ptr[int64](1)})
	f.expect(t, line{0, Stdout, "old"})
	appendRaw(t, path, out(1, "a"), errl(2, "b"))
	f.expect(t, line{1, Stdout, "a"}, line{2, Stderr, "b"})
	// A line written in parts is emitted once, whole.
	appendRaw(t, path, part(3, Stdout, "c1"))
	appendText(t, path, out(4, "c2").String()[:10]) // half a raw line
	appendText(t, path, out(4, "c2").String()[10:])
	f.expect(t, line{3, Stdout, "c1c2"})

	start := time.Now()
	f.cancel()
	if err := f.end(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Read took %v to end after cancel", d)
	}
}

func TestFollowRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	appendRaw(t, path, out(0, "a"))
	f := startFollow(t, path, Options{NextPath: noNext})
	f.expect(t, line{0, Stdout, "a"})

	// The kubelet renames the file; the runtime writes to the renamed file
	// until it reopens the path, partial line included.
	rotated := path + ".20260102-030405"
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	appendRaw(t, rotated, out(1, "b"), part(2, Stdout, "c1"))
	appendRaw(t, path, out(3, "c2"), out(4, "d"))
	f.expect(t, line{1, Stdout, "b"}, line{2, Stdout, "c1c2"}, line{4, Stdout, "d"})

	// Again, to check the follower keeps up with more than one rotation.
	if err := os.Rename(path, path+".20260102-030406"); err != nil {
		t.Fatal(err)
	}
	appendRaw(t, path, out(5, "e"))
	f.expect(t, line{5, Stdout, "e"})
}

func TestFollowTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendRaw(t, path, out(0, "aaaaaaaa"), out(1, "bbbbbbbb"))
	f := startFollow(t, path, Options{NextPath: noNext})
	f.expect(t, line{0, Stdout, "aaaaaaaa"}, line{1, Stdout, "bbbbbbbb"})
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendRaw(t, path, out(2, "c"))
	f.expect(t, line{2, Stdout, "c"})
}

func TestFollowNextInstance(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "main")
	first, second, third := filepath.Join(dir, "0.log"), filepath.Join(dir, "1.log"), filepath.Join(dir, "3.log")
	appendRaw(t, first, out(0, "a"))
	var finished atomic.Bool
	f := startFollow(t, first, Options{Finished: finished.Load})
	f.expect(t, line{0, Stdout, "a"})

	// The first instance dies in the middle of a line; the next one starts.
	appendRaw(t, first, out(1, "b"), part(2, Stdout, "cut"))
	appendRaw(t, second, out(3, "c"))
	f.expect(t, line{1, Stdout, "b"}, line{2, Stdout, "cut"}, line{3, Stdout, "c"})
	appendRaw(t, second, errl(4, "d"))
	f.expect(t, line{4, Stderr, "d"})

	// A gap in restart counts is followed too.
	appendRaw(t, third, out(5, "e"))
	f.expect(t, line{5, Stdout, "e"})

	// The container is done: Read drains the file and returns.
	appendRaw(t, third, out(6, "f"))
	finished.Store(true)
	f.expect(t, line{6, Stdout, "f"})
	if err := f.end(t); err != nil {
		t.Errorf("Read after Finished: %v", err)
	}
}

func TestFollowLimitBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	f := startFollow(t, path+".missing", Options{})
	if err := f.end(t); err == nil {
		t.Error("following a missing file succeeded")
	}

	appendRaw(t, path, out(0, "abc"))
	f = startFollow(t, path, Options{LimitBytes: ptr[int64](5), NextPath: noNext})
	f.expect(t, line{0, Stdout, "abc"})
	appendRaw(t, path, out(1, "defg"))
	f.expect(t, line{1, Stdout, "de"})
	if err := f.end(t); err != nil {
		t.Errorf("Read at the limit: %v", err)
	}
}

func noNext(string) (string, bool) { return "", false }
