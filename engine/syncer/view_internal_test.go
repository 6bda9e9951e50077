package syncer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLogTail is the kubelet's readLastStringFromContainerLogs on the CRI
// logs a runtime writes: the last 80 lines of the file, the last 2 KiB of
// what they say, both streams, a partial line without a newline of its
// own — and the runtime's last write without a newline ("echo -n DONE",
// node-conformance's FallbackToLogsOnError test), which containerd writes
// as a partial line.
func TestLogTail(t *testing.T) {
	const ts = "2026-12-05T04:00:00.000000000Z"
	line := func(stream, tag, text string) string { return ts + " " + stream + " " + tag + " " + text + "\n" }
	many := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(line("stdout", "F", fmt.Sprintf("line %d", i)))
		}
		return b.String()
	}
	wantMany := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		return b.String()
	}
	long := strings.Repeat("x", 3000)
	for _, tc := range []struct {
		name, log, want string
	}{
		{"a last write without a newline", line("stdout", "P", "DONE"), "DONE"},
		{"full lines keep their newlines", line("stdout", "F", "first") + line("stderr", "F", "last words"), "first\nlast words\n"},
		{"a line written in parts", line("stdout", "P", "hel") + line("stdout", "F", "lo"), "hello\n"},
		{"the last 80 lines", many(100), wantMany(20, 100)},
		{"the last 2 KiB", line("stdout", "F", long), strings.Repeat("x", 2047) + "\n"},
		{"an empty log", "", ""},
		{"a line that does not parse is skipped", line("stdout", "F", "ok") + "garbage\n" + line("stdout", "F", "ok 2"), "ok\nok 2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "0.log")
			if err := os.WriteFile(path, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			got, err := logTail(ctx, path, maxTerminationMessageLogLine, maxTerminationMessageLogLen)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("logTail = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("no log path", func(t *testing.T) {
		if _, err := logTail(t.Context(), "", maxTerminationMessageLogLine, maxTerminationMessageLogLen); err == nil {
			t.Error("logTail of no path: want an error")
		}
	})
	t.Run("a log removed", func(t *testing.T) {
		if _, err := logTail(t.Context(), filepath.Join(t.TempDir(), "gone.log"), maxTerminationMessageLogLine, maxTerminationMessageLogLen); err == nil {
			t.Error("logTail of a missing file: want an error")
		}
	})
}
