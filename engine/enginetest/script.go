package enginetest

import (
	"path"
	"strconv"
	"strings"
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

// interpret reads argv (command followed by args) as FakeRuntime does:
//
//   - `sh -c SCRIPT` (also /bin/sh, ash, bash) runs SCRIPT's statements,
//     separated by ';' or newlines, in order: `echo WORDS` writes a stdout
//     line (a stderr line with `>&2` or `1>&2`), `exit [N]` ends the program,
//     `true`, `:` and `false` set the status, `trap 'exit N' TERM` (also
//     SIGTERM or 15) makes a graceful stop exit with N and `trap "" TERM`
//     makes it ignore SIGTERM. Any other statement
//     (sleep, while, wait, …) keeps the program running until it is stopped.
//     A script that runs out of statements exits with the last status.
//   - `echo WORDS`, `true` and `false` alone do what they say.
//   - Anything else, and an empty command, runs until it is stopped.
func interpret(argv []string) program {
	if len(argv) == 0 {
		return program{}
	}
	switch path.Base(argv[0]) {
	case "sh", "ash", "bash":
		if len(argv) >= 3 && argv[1] == "-c" {
			return interpretScript(argv[2])
		}
		return program{}
	case "echo":
		return program{output: []logLine{echoLine(argv[1:])}, exits: true}
	case "true":
		return program{exits: true}
	case "false":
		return program{exits: true, exitCode: 1}
	}
	return program{}
}

func interpretScript(script string) program {
	var p program
	var status int32
	for _, st := range statements(script) {
		if len(st) == 0 {
			continue
		}
		switch st[0] {
		case "echo":
			p.output = append(p.output, echoLine(st[1:]))
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
