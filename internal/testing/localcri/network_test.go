package localcri

import (
	"net/netip"
	"testing"
)

func TestParseRouteLine(t *testing.T) {
	for _, c := range []struct {
		line string
		want string // "" for no prefix
	}{
		{"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT", ""},
		{"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0", ""},
		{"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0", "192.0.2.0/24"},
		{"br0\t0000640A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0", "10.100.0.0/16"},
		{"short line", ""},
	} {
		p, ok := parseRouteLine(c.line)
		got := ""
		if ok {
			got = p.String()
		}
		if got != c.want {
			t.Errorf("parseRouteLine(%q) = %q, want %q", c.line, got, c.want)
		}
	}
}

func TestPickSubnet(t *testing.T) {
	first := subnetAt(0)
	if first.String() != "10.100.0.0/24" || subnetAt(subnetCount).String() != "10.100.0.0/24" || subnetAt(256).String() != "10.101.0.0/24" {
		t.Fatalf("subnetAt: %s %s %s", first, subnetAt(subnetCount), subnetAt(256))
	}
	for _, c := range []struct {
		name    string
		used    []string
		claimed []string
		start   int
		want    string
	}{
		{"free", nil, nil, 0, "10.100.0.0/24"},
		{"start elsewhere", nil, nil, 300, "10.101.44.0/24"},
		{"claimed is skipped", nil, []string{"10.100.0.0/24"}, 0, "10.100.1.0/24"},
		{"route overlap is skipped", []string{"10.100.0.0/23"}, nil, 0, "10.100.2.0/24"},
		{"wide route is skipped", []string{"10.100.0.0/16"}, nil, 255, "10.101.0.0/24"},
		{"wraps around", nil, []string{"10.227.255.0/24"}, subnetCount - 1, "10.100.0.0/24"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var used []netip.Prefix
			for _, u := range c.used {
				used = append(used, netip.MustParsePrefix(u))
			}
			claimed := map[netip.Prefix]bool{}
			for _, u := range c.claimed {
				claimed[netip.MustParsePrefix(u)] = true
			}
			got, err := pickSubnet(used, claimed, c.start)
			if err != nil || got.String() != c.want {
				t.Errorf("pickSubnet = %s, %v; want %s", got, err, c.want)
			}
		})
	}
	if _, err := pickSubnet([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, nil, 0); err == nil {
		t.Error("pickSubnet with everything used: no error")
	}
}

func TestFlavours(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    Flavour
		wantErr bool
	}{
		{"", Containerd2, false},
		{"2", Containerd2, false},
		{"1.6", Containerd16, false},
		{"1.7", "", true},
		{"v2", "", true},
	} {
		got, err := ParseFlavour(c.in)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("ParseFlavour(%q) = %q, %v", c.in, got, err)
		}
	}
	t.Setenv(EnvFlavour, "1.6")
	if f, err := FlavourFromEnv(); f != Containerd16 || err != nil {
		t.Errorf("FlavourFromEnv with 1.6 = %q, %v", f, err)
	}
	if b := flavourBinaries(Containerd2, "/repo/.tmp"); b.containerd != "/repo/.tmp/containerd-v2.4.2/bin/containerd" || b.shimDir != "/repo/.tmp/containerd-v2.4.2/bin" {
		t.Errorf("containerd 2 binaries = %+v", b)
	}
	if b := flavourBinaries(Containerd16, "/repo/.tmp"); b.containerd != "/usr/bin/containerd" || b.ctr != "/usr/bin/ctr" {
		t.Errorf("containerd 1.6 binaries = %+v", b)
	}
}
