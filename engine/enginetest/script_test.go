package enginetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestInterpret(t *testing.T) {
	for _, c := range []struct {
		name string
		argv []string
		want program
	}{
		{"empty runs", nil, program{}},
		{"sleep runs", []string{"sleep", "3600"}, program{}},
		{"echo", []string{"/bin/echo", "a", "b"}, program{output: []logLine{{"stdout", "a b"}}, exits: true}},
		{"true", []string{"true"}, program{exits: true}},
		{"false", []string{"false"}, program{exits: true, exitCode: 1}},
		{"sh without -c runs", []string{"sh"}, program{}},
		{"script exits", []string{"/bin/sh", "-c", "echo hello; exit 3"},
			program{output: []logLine{{"stdout", "hello"}}, exits: true, exitCode: 3}},
		{"stderr", []string{"sh", "-c", "echo out; echo 'err line' >&2; echo x 1>&2"},
			program{output: []logLine{{"stdout", "out"}, {"stderr", "err line"}, {"stderr", "x"}}, exits: true}},
		{"quotes and newlines", []string{"sh", "-c", "echo \"a;b\" 'c d'\necho e\\ f"},
			program{output: []logLine{{"stdout", "a;b c d"}, {"stdout", "e f"}}, exits: true}},
		{"last status", []string{"sh", "-c", "echo x; false"},
			program{output: []logLine{{"stdout", "x"}}, exits: true, exitCode: 1}},
		{"exit without code", []string{"sh", "-c", "false; exit"}, program{exits: true, exitCode: 1}},
		{"exit 256 wraps", []string{"sh", "-c", "exit 256"}, program{exits: true}},
		{"trap exit runs", []string{"sh", "-c", TermScript}, program{termExit: ptr.To(int32(0))}},
		{"trap exit 5 on SIGTERM", []string{"sh", "-c", "trap 'exit 5' INT SIGTERM; sleep 9"}, program{termExit: ptr.To(int32(5))}},
		{"trap ignore", []string{"sh", "-c", `trap "" TERM; while :; do sleep 1 & wait; done`}, program{termIgnored: true}},
		{"trap on INT only", []string{"sh", "-c", "trap 'exit 1' INT; sleep 9"}, program{}},
		{"background job runs", []string{"sh", "-c", "echo a; sleep 1 & wait; echo b"},
			program{output: []logLine{{"stdout", "a"}}}},
		{"pipeline runs", []string{"sh", "-c", "echo a | cat"}, program{}},
		{"untimed script's sleep runs", []string{"sh", "-c", "echo a; sleep 5; exit 3"}, program{output: []logLine{{"stdout", "a"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := interpret(c.argv, false)
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(program{}, logLine{})); diff != "" {
				t.Errorf("interpret(%q) (-want +got):\n%s", c.argv, diff)
			}
		})
	}
}

// TestInterpretTimed: with timed sleeps a sleep delays what follows it,
// and a sleep that cannot end runs until stopped.
func TestInterpretTimed(t *testing.T) {
	for _, c := range []struct {
		name string
		argv []string
		want program
	}{
		{"timed sleep exits", []string{"sleep", "2.5"}, program{after: 2500 * time.Millisecond, exits: true}},
		{"timed sleep adds its arguments", []string{"/bin/sleep", "1m", "30s", "1"}, program{after: 91 * time.Second, exits: true}},
		{"timed sleep infinity runs", []string{"sleep", "infinity"}, program{}},
		{"timed sleep of nonsense runs", []string{"sleep", "NaN"}, program{}},
		{"timed sleep of years runs", []string{"sleep", "99999d"}, program{}},
		{"timed script", []string{"sh", "-c", "echo a; sleep 5; echo b; sleep 1h; exit 3"},
			program{output: []logLine{{"stdout", "a"}}, after: time.Hour + 5*time.Second, later: []logLine{{"stdout", "b"}}, exits: true, exitCode: 3}},
		{"timed script runs on after its sleep", []string{"sh", "-c", "sleep 2; echo up; while true; do sleep 1; done"},
			program{after: 2 * time.Second, later: []logLine{{"stdout", "up"}}}},
		{"timed script's status", []string{"sh", "-c", "sleep 1; false"}, program{after: time.Second, exits: true, exitCode: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := interpret(c.argv, true)
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(program{}, logLine{})); diff != "" {
				t.Errorf("interpret(%q) (-want +got):\n%s", c.argv, diff)
			}
		})
	}
}

func TestStopExitCode(t *testing.T) {
	for _, c := range []struct {
		name string
		p    program
		want int32
	}{
		{"trap exit", program{termExit: ptr.To(int32(4)), pid1: true}, 4},
		{"trap ignore", program{termIgnored: true}, KillExitCode},
		{"PID 1 without handler", program{pid1: true}, KillExitCode},
		{"child without handler", program{}, TermExitCode},
	} {
		if got := c.p.stopExitCode(); got != c.want {
			t.Errorf("%s: stopExitCode() = %d, want %d", c.name, got, c.want)
		}
	}
}
