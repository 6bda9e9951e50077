package localcri

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ShimPIDs returns the containerd shims serving the containerd at socket
// (their -address argument), as the tools that measure a private
// containerd's CPU count them.
func ShimPIDs(socket string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		cmd, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(cmd, []byte("containerd-shim")) {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		for i, a := range args {
			if (a == "-address" || a == "--address") && i+1 < len(args) && args[i+1] == socket {
				if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
					out = append(out, pid)
				}
			}
		}
	}
	return out
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that nobody
// listened on a moment ago (all n are held open until it returns, so they
// differ).
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
