package enginetest

import (
	"path"
	"strconv"
	"strings"
	"time"
)

// program is what FakeRuntime makes of a container's command: the lines
// it writes when it starts and whether and how it ends.
type program struct {
	// output is written to the log when the container starts.
	output []logLine
	// exits is true when the program ends by itself, with exitCode.
	exits    bool
	exitCode int32
	// termExit, when set, is the exit code of a graceful stop: the program
	// traps SIGTERM with `exit N`.
	termExit *int32
	// termIgnored is true when the program traps SIGTERM with "" (ignores
	// it), so that a graceful stop kills it after the grace period.
	termIgnored bool
	// pid1 is true when the container has its own PID namespace, so that
	// the program is PID 1 and, without a handler, ignores SIGTERM.
	pid1 bool
	// after is how long the program's `sleep`s take when sleeps are
	// timed (WithTimedSleeps): once it has passed, later is written and
	// exits applies. Zero: everything happens at the start.
	after time.Duration
	later []logLine
}

// stopExitCode is the exit code of a graceful stop (timeout above zero):
// the trap's `exit N`; KillExitCode when SIGTERM is ignored (`trap "" TERM` or
// PID 1 without a handler) and the grace period ends in SIGKILL; otherwise
// TermExitCode, as SIGTERM's default action ends the process.
func (p program) stopExitCode() int32 {
	switch {
	case p.termExit != nil:
		return *p.termExit
	case p.termIgnored || p.pid1:
		return KillExitCode
	default:
		return TermExitCode
	}
}

// logLine is one line of container output.
type logLine struct {
	stream string // "stdout" or "stderr"
	text   string
}

// interpret reads argv (command followed by args) as FakeRuntime does;
// timed says whether `sleep N` takes N (WithTimedSleeps) or runs until
// the program is stopped:
//
//   - `sh -c SCRIPT` (also /bin/sh, ash, bash) runs SCRIPT's statements,
//     separated by ';' or newlines, in order: `echo WORDS` writes a stdout
//     line (a stderr line with `>&2` or `1>&2`), `exit [N]` ends the program,
//     `true`, `:` and `false` set the status, `trap 'exit N' TERM` (also
//     SIGTERM or 15) makes a graceful stop exit with N and `trap "" TERM`
//     makes it ignore SIGTERM. Any other statement
//     (while, wait, …) keeps the program running until it is stopped, and
//     so does `sleep` unless timed: a timed `sleep N` (seconds, or with
//     GNU sleep's suffix s, m, h or d; several arguments add up) delays
//     what follows it by N, and the lines the statements after the first
//     sleep write are written when all the script's sleeps have passed;
//     `sleep infinity` runs until stopped.
//     A script that runs out of statements exits with the last status.
//   - `echo WORDS`, `true` and `false` alone do what they say; `sleep N`
//     alone, when timed, exits 0 after N.
//   - Anything else, and an empty command, runs until it is stopped.
func interpret(argv []string, timed bool) program {
	if len(argv) == 0 {
		return program{}
	}
	switch path.Base(argv[0]) {
	case "sh", "ash", "bash":
		if len(argv) >= 3 && argv[1] == "-c" {
			return interpretScript(argv[2], timed)
		}
		return program{}
	case "echo":
		return program{output: []logLine{echoLine(argv[1:])}, exits: true}
	case "true":
		return program{exits: true}
	case "false":
		return program{exits: true, exitCode: 1}
	case "sleep":
		if d, ok := sleepDuration(argv[1:]); timed && ok {
			return program{after: d, exits: true}
		}
	}
	return program{}
}

func interpretScript(script string, timed bool) program {
	var p program
	var status int32
	for _, st := range statements(script) {
		if len(st) == 0 {
			continue
		}
		switch st[0] {
		case "echo":
			if p.after > 0 {
				p.later = append(p.later, echoLine(st[1:]))
			} else {
				p.output = append(p.output, echoLine(st[1:]))
			}
			status = 0
		case "sleep":
			d, ok := sleepDuration(st[1:])
			if !timed || !ok {
				// Runs until stopped.
				return p
			}
			p.after += d
			status = 0
		case "true", ":":
			status = 0
		case "false":
			status = 1
		case "exit":
			code := status
			if len(st) > 1 {
				n, err := strconv.ParseInt(st[1], 10, 32)
				if err != nil {
					return p
				}
				code = int32(n) & 0xff
			}
			p.exits, p.exitCode = true, code
			return p
		case "trap":
			if len(st) >= 3 && trapsTerm(st[2:]) {
				if strings.TrimSpace(st[1]) == "" {
					p.termExit, p.termIgnored = nil, true
				} else if code, ok := exitAction(st[1]); ok {
					p.termExit, p.termIgnored = &code, false
				}
			}
			status = 0
		default:
			// Anything else keeps running until stopped.
			return p
		}
	}
	p.exits, p.exitCode = true, status
	return p
}

// maxSleepSeconds bounds a timed sleep (about 31 years): a longer one
// runs until stopped.
const maxSleepSeconds = 1e9

// sleepDuration reads the arguments of sleep as GNU sleep does: numbers
// of seconds, or of minutes, hours or days with the suffix m, h or d,
// added up. ok is false for infinity and for what sleep would refuse.
func sleepDuration(args []string) (time.Duration, bool) {
	if len(args) == 0 {
		return 0, false
	}
	var total time.Duration
	for _, a := range args {
		unit := time.Second
		switch {
		case strings.HasSuffix(a, "s"):
			a = a[:len(a)-1]
		case strings.HasSuffix(a, "m"):
			a, unit = a[:len(a)-1], time.Minute
		case strings.HasSuffix(a, "h"):
			a, unit = a[:len(a)-1], time.Hour
		case strings.HasSuffix(a, "d"):
			a, unit = a[:len(a)-1], 24*time.Hour
		}
		n, err := strconv.ParseFloat(a, 64)
		// (A NaN fails the comparison too.)
		if err != nil || !(n >= 0 && n*unit.Seconds() <= maxSleepSeconds) {
			return 0, false
		}
		total += time.Duration(n * float64(unit))
	}
	return total, true
}

// trapsTerm reports whether trap's signal list names SIGTERM.
func trapsTerm(signals []string) bool {
	for _, s := range signals {
		switch strings.ToUpper(s) {
		case "TERM", "SIGTERM", "15":
			return true
		}
	}
	return false
}

// exitAction returns N when a trap action is `exit N` (`exit` alone is 0).
func exitAction(action string) (int32, bool) {
	f := strings.Fields(action)
	if len(f) == 0 || f[0] != "exit" || len(f) > 2 {
		return 0, false
	}
	if len(f) == 1 {
		return 0, true
	}
	n, err := strconv.ParseInt(f[1], 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n) & 0xff, true
}

// echoLine makes the line `echo args` writes, honouring >&2 and 1>&2 and
// dropping other redirections.
func echoLine(args []string) logLine {
	l := logLine{stream: "stdout"}
	words := make([]string, 0, len(args))
	for _, a := range args {
		switch {
		case a == ">&2" || a == "1>&2":
			l.stream = "stderr"
		case strings.HasPrefix(a, ">") || strings.HasPrefix(a, "2>"):
		default:
			words = append(words, a)
		}
	}
	l.text = strings.Join(words, " ")
	return l
}

// statements splits a shell script into statements of words, honouring
// single and double quotes and backslashes. Separators are ';' and newline;
// a statement holding '&' or '|' is returned as the single word "&" so that
// it counts as "keeps running".
func statements(script string) [][]string {
	var (
		out     [][]string
		cur     []string
		word    strings.Builder
		inWord  bool
		complex bool
	)
	endWord := func() {
		if inWord {
			cur = append(cur, word.String())
			word.Reset()
			inWord = false
		}
	}
	endStatement := func() {
		endWord()
		if complex {
			cur = []string{"&"}
		}
		out = append(out, cur)
		cur, complex = nil, false
	}
	for i := 0; i < len(script); i++ {
		c := script[i]
		switch {
		case c == '\'':
			inWord = true
			j := strings.IndexByte(script[i+1:], '\'')
			if j < 0 {
				word.WriteString(script[i+1:])
				i = len(script)
				break
			}
			word.WriteString(script[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(script) && script[i] != '"'; i++ {
				if script[i] == '\\' && i+1 < len(script) && strings.IndexByte("\"\\$`", script[i+1]) >= 0 {
					i++
				}
				word.WriteByte(script[i])
			}
		case c == '\\' && i+1 < len(script):
			inWord = true
			i++
			word.WriteByte(script[i])
		case c == ';' || c == '\n':
			endStatement()
		case c == '&' || c == '|':
			// ">&2" is a redirection, not a background job.
			if c == '&' && i > 0 && script[i-1] == '>' {
				inWord = true
				word.WriteByte(c)
				break
			}
			endWord()
			complex = true
		case c == ' ' || c == '\t':
			endWord()
		default:
			inWord = true
			word.WriteByte(c)
		}
	}
	endStatement()
	return out
}
