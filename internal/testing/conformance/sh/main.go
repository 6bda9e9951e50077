package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

const busybox = "/bin/busybox"

func main() {
	if cmd := simpleCommand(os.Args[1:]); cmd != nil {
		if path, err := exec.LookPath(cmd[0]); err == nil {
			_ = syscall.Exec(path, cmd, os.Environ())
		}
	}
	// busybox runs the applet argv[0] names, and ash's messages begin
	// with it ("/bin/sh: …").
	arg0 := os.Args[0]
	if filepath.Base(arg0) != "sh" {
		arg0 = "sh"
	}
	err := syscall.Exec(busybox, append([]string{arg0}, os.Args[1:]...), os.Environ())
	_, _ = os.Stderr.WriteString("sh: exec " + busybox + ": " + err.Error() + "\n")
	os.Exit(127)
}

// simpleCommand returns the words of args' script if args are `-c
// SCRIPT` and the script is one command of plain words that is no
// builtin and no assignment; nil otherwise.
func simpleCommand(args []string) []string {
	if len(args) != 2 || args[0] != "-c" {
		return nil
	}
	script := args[1]
	for _, r := range script {
		plain := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(" _./:,@%+-", r)
		if !plain {
			return nil
		}
	}
	words := strings.Fields(script)
	if len(words) == 0 || strings.Contains(words[0], "=") || builtins[words[0]] {
		return nil
	}
	return words
}

// builtins are ash's commands that are no program (or behave otherwise
// as builtins), which ash runs.
var builtins = map[string]bool{
	".": true, "alias": true, "bg": true, "break": true, "cd": true, "command": true, "continue": true,
	"echo": true, "eval": true, "exec": true, "exit": true, "export": true, "false": true, "fg": true,
	"getopts": true, "hash": true, "jobs": true, "kill": true, "local": true, "printf": true, "pwd": true,
	"read": true, "readonly": true, "return": true, "set": true, "shift": true, "source": true, "test": true,
	"times": true, "trap": true, "true": true, "type": true, "ulimit": true, "umask": true, "unalias": true,
	"unset": true, "wait": true, "[": true,
}
