package localcri

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortsDistinctAndFree(t *testing.T) {
	ports, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] || p <= 0 {
			t.Fatalf("ports %v: want three distinct ports", ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("port %d not free after FreePorts returned: %v", p, err)
			continue
		}
		_ = l.Close()
	}
}

func TestShimPIDsOfNoContainerd(t *testing.T) {
	if pids := ShimPIDs("/run/localcri/no-such-instance/containerd.sock"); len(pids) != 0 {
		t.Errorf("shims of a socket nothing serves: %v", pids)
	}
}
