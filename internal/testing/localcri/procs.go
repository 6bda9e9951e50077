package localcri

import (
	"bytes"
	"fmt"
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
		if zombie(pid) {
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

// statFields returns the fields of /proc/<pid>/stat that follow the
// command name (which may hold spaces and ")"): the first is the state
// (field 3), the third the process group (field 5), the twelfth to
// fifteenth the CPU times (fields 14 to 17).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) == 0 {
		return nil, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	return f, nil
}

// zombie reports whether process pid has exited and waits to be reaped
// (state Z or X).
func zombie(pid int) bool {
	f, err := statFields(pid)
	return err == nil && (f[0] == "Z" || f[0] == "X")
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
	f, err := statFields(pid)
	return err == nil && f[0] != "Z"
}
