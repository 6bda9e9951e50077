package localcri

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// process is a running process as /proc shows it.
type process struct {
	pid     int
	cmdline string // arguments joined by spaces
	cgroup  string // content of /proc/PID/cgroup
}

// processes lists every live process except the caller. Zombies are left
// out: they hold nothing but their pid, and this VM's PID 1 reaps the
// orphaned ones (a killed shim's children) only after a while.
func processes() []process {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if zombie(e.Name()) {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		out = append(out, process{
			pid:     pid,
			cmdline: strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))),
			cgroup:  string(cg),
		})
	}
	return out
}

// zombie reports whether process pid has exited and waits to be reaped
// (state Z or X in /proc/PID/stat; the state follows the ")" that ends the
// command name, which may itself hold ")").
func zombie(pid string) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	return stat[i+2] == 'Z' || stat[i+2] == 'X'
}

// processesOf lists the processes whose command line names the instance
// directory (containerd and its shims) or whose cgroup names one of ids (the
// containers).
func processesOf(dir string, ids []string) []process {
	var out []process
	for _, p := range processes() {
		if strings.Contains(p.cmdline, dir+"/") || cgroupNamesAny(p.cgroup, ids) {
			out = append(out, p)
		}
	}
	return out
}

func cgroupNamesAny(cgroup string, ids []string) bool {
	for _, id := range ids {
		if id != "" && strings.Contains(cgroup, id) {
			return true
		}
	}
	return false
}

// Cmdline returns the command line of pid, or "" if it is gone.
func Cmdline(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z'
}
