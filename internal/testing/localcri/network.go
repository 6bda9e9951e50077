package localcri

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// machineDir holds every instance's directory and the machine-wide claims
// (subnets, host ports) that keep instances apart. Unix socket paths must
// stay short, so it is fixed and short.
const machineDir = "/run/localcri"

// Pod subnets are /24s taken from 10.100.0.0/16 … 10.227.255.0/24.
const (
	subnetFirstOctet2 = 100
	subnetCount       = 128 * 256
)

// subnetAt returns the i-th candidate pod subnet.
func subnetAt(i int) netip.Prefix {
	i %= subnetCount
	a := netip.AddrFrom4([4]byte{10, byte(subnetFirstOctet2 + i/256), byte(i % 256), 0})
	return netip.PrefixFrom(a, 24)
}

// pickSubnet returns the first candidate from index start on that overlaps
// no used prefix and is not claimed.
func pickSubnet(used []netip.Prefix, claimed map[netip.Prefix]bool, start int) (netip.Prefix, error) {
	for n := range subnetCount {
		p := subnetAt(start + n)
		if claimed[p] {
			continue
		}
		free := true
		for _, u := range used {
			if u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("no free /24 in 10.100.0.0/9")
}

// hostPrefixes lists the IPv4 prefixes the host already uses: routes of the
// main table (except the default route) and interface addresses.
func hostPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("read routes: %w", err)
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if p, ok := parseRouteLine(s.Text()); ok {
			out = append(out, p)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read routes: %w", err)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list interface addresses: %w", err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// parseRouteLine parses one line of /proc/net/route; the header and the
// default route give false.
func parseRouteLine(line string) (netip.Prefix, bool) {
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] == "Iface" {
		return netip.Prefix{}, false
	}
	dst, err1 := hex.DecodeString(fields[1])
	mask, err2 := hex.DecodeString(fields[7])
	if err1 != nil || err2 != nil || len(dst) != 4 || len(mask) != 4 {
		return netip.Prefix{}, false
	}
	// The kernel prints the addresses in host byte order (little endian here).
	d := binary.LittleEndian.Uint32(dst)
	m := binary.LittleEndian.Uint32(mask)
	var db, mb [4]byte
	binary.BigEndian.PutUint32(db[:], d)
	binary.BigEndian.PutUint32(mb[:], m)
	bits, _ := net.IPMask(mb[:]).Size()
	if bits == 0 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(netip.AddrFrom4(db), bits).Masked(), true
}

// claimSubnet picks a free pod subnet and records it for id, under the
// machine lock, so that concurrent instances never pick the same one.
// Claims whose instance directory is gone are stale and reused.
func claimSubnet(ctx context.Context, id string) (netip.Prefix, error) {
	lock, err := lockFile(ctx, filepath.Join(machineDir, "claims.lock"))
	if err != nil {
		return netip.Prefix{}, err
	}
	defer lock.Unlock()
	dir := filepath.Join(machineDir, "subnets")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return netip.Prefix{}, fmt.Errorf("create subnet claims: %w", err)
	}
	claimed := map[netip.Prefix]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("read subnet claims: %w", err)
	}
	for _, e := range entries {
		p, err := netip.ParsePrefix(strings.ReplaceAll(e.Name(), "_", "/"))
		if err != nil {
			continue
		}
		owner, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil && instanceExists(strings.TrimSpace(string(owner))) {
			claimed[p] = true
			continue
		}
		_ = os.Remove(filepath.Join(dir, e.Name()))
	}
	used, err := hostPrefixes()
	if err != nil {
		return netip.Prefix{}, err
	}
	p, err := pickSubnet(used, claimed, rand.IntN(subnetCount))
	if err != nil {
		return netip.Prefix{}, err
	}
	if err := os.WriteFile(subnetClaimPath(p), []byte(id+"\n"), 0o644); err != nil {
		return netip.Prefix{}, fmt.Errorf("claim subnet: %w", err)
	}
	return p, nil
}

func subnetClaimPath(p netip.Prefix) string {
	return filepath.Join(machineDir, "subnets", strings.ReplaceAll(p.String(), "/", "_"))
}

// claimHostPort finds a free TCP port on the host and records it for id, so
// that no other instance hands out the same port.
func claimHostPort(ctx context.Context, id string) (int, error) {
	lock, err := lockFile(ctx, filepath.Join(machineDir, "claims.lock"))
	if err != nil {
		return 0, err
	}
	defer lock.Unlock()
	dir := filepath.Join(machineDir, "ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("create port claims: %w", err)
	}
	for range 100 {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp4", "0.0.0.0:0")
		if err != nil {
			return 0, fmt.Errorf("find free port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		path := filepath.Join(dir, strconv.Itoa(port))
		if owner, err := os.ReadFile(path); err == nil && instanceExists(strings.TrimSpace(string(owner))) {
			continue
		}
		if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
			return 0, fmt.Errorf("claim port: %w", err)
		}
		return port, nil
	}
	return 0, errors.New("no unclaimed free port after 100 tries")
}

// releaseClaims removes the subnet and port claims owned by id.
func releaseClaims(id string) {
	for _, sub := range []string{"subnets", "ports"} {
		dir := filepath.Join(machineDir, sub)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == id {
				_ = os.Remove(p)
			}
		}
	}
}

// instanceExists reports whether an instance directory exists for id.
func instanceExists(id string) bool {
	if id == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(machineDir, id))
	return err == nil
}

// linkExists reports whether a network link with that name exists.
func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// bridgePorts lists the links enslaved to a bridge.
func bridgePorts(bridge string) []string {
	return dirNames(filepath.Join("/sys/class/net", bridge, "brif"))
}

// deleteLink deletes a network link if it exists.
func deleteLink(ctx context.Context, name string) error {
	if !linkExists(name) {
		return nil
	}
	if _, err := runCommand(ctx, nil, "", systemTool("ip"), "link", "del", name); err != nil && linkExists(name) {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}
