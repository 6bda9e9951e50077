package localcri

import (
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	toml "github.com/pelletier/go-toml/v2"
)

var testParams = configParams{
	root:               "/run/localcri/abc123/root",
	state:              "/run/localcri/abc123/state",
	temp:               "/run/localcri/abc123/tmp",
	socket:             "/run/localcri/abc123/containerd.sock",
	ttrpcSocket:        "/run/localcri/abc123/containerd.sock.ttrpc",
	runcRoot:           "/run/localcri/abc123/runc",
	shimSocketDir:      "/run/localcri/abc123/s",
	cniConfDir:         "/run/localcri/abc123/cni/net.d",
	certsDir:           "/run/localcri/abc123/certs.d",
	optDir:             "/run/localcri/abc123/opt",
	sandboxImage:       PauseImage,
	statsCollectPeriod: DefaultStatsCollectPeriod,
}

// lookup follows a path of table names in a decoded TOML document.
func lookup(t *testing.T, doc map[string]any, path ...string) any {
	t.Helper()
	var cur any = doc
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: not a table at %q", strings.Join(path, "."), k)
		}
		cur = m[k]
	}
	return cur
}

func patched(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	out, err := patchConfig(b, testParams)
	if err != nil {
		t.Fatalf("patchConfig: %v", err)
	}
	var doc map[string]any
	if err := toml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("patched config does not parse: %v\n%s", err, out)
	}
	return doc
}

func TestPatchConfigContainerd2(t *testing.T) {
	doc := patched(t, "containerd-v2.4.2-default.toml")
	const (
		images  = "io.containerd.cri.v1.images"
		runtime = "io.containerd.cri.v1.runtime"
	)
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"version"}, int64(4)},
		{[]string{"root"}, testParams.root},
		{[]string{"state"}, testParams.state},
		{[]string{"temp"}, testParams.temp},
		{[]string{"imports"}, []any{}},
		{[]string{"plugins", "io.containerd.server.v1.grpc", "address"}, testParams.socket},
		{[]string{"plugins", "io.containerd.server.v1.ttrpc", "address"}, testParams.ttrpcSocket},
		{[]string{"plugins", images, "pinned_images", "sandbox"}, PauseImage},
		{[]string{"plugins", images, "registry", "config_path"}, testParams.certsDir},
		{[]string{"plugins", "io.containerd.transfer.v1.local", "config_path"}, testParams.certsDir},
		{[]string{"plugins", runtime, "restrict_oom_score_adj"}, true},
		{[]string{"plugins", runtime, "netns_mounts_under_state_dir"}, true},
		{[]string{"plugins", runtime, "cni", "bin_dirs"}, []any{"/usr/lib/cni"}},
		{[]string{"plugins", runtime, "cni", "conf_dir"}, testParams.cniConfDir},
		{[]string{"plugins", runtime, "containerd", "runtimes", "runc", "options", "Root"}, testParams.runcRoot},
		{[]string{"plugins", "io.containerd.nri.v1.nri", "disable"}, true},
		{[]string{"plugins", "io.containerd.shim.v1.manager", "socket_dir"}, testParams.shimSocketDir},
		{[]string{"plugins", "io.containerd.internal.v1.opt", "path"}, testParams.optDir},
		{[]string{"plugins", runtime, "stats_collect_period"}, "10s"},
		// Untouched keys survive (the images plugin's key of the same
		// name is its snapshot stats period, in seconds).
		{[]string{"plugins", images, "stats_collect_period"}, int64(10)},
		{[]string{"plugins", "io.containerd.gc.v1.scheduler", "pause_threshold"}, 0.02},
		{[]string{"timeouts", "io.containerd.timeout.shim.load"}, "5s"},
	} {
		if diff := cmp.Diff(c.want, lookup(t, doc, c.path...)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", strings.Join(c.path, "."), diff)
		}
	}
}

func TestPatchConfigContainerd16(t *testing.T) {
	doc := patched(t, "containerd-1.6-default.toml")
	const cri = "io.containerd.grpc.v1.cri"
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"version"}, int64(2)},
		{[]string{"root"}, testParams.root},
		{[]string{"state"}, testParams.state},
		{[]string{"grpc", "address"}, testParams.socket},
		{[]string{"ttrpc", "address"}, testParams.ttrpcSocket},
		{[]string{"plugins", cri, "sandbox_image"}, PauseImage},
		{[]string{"plugins", cri, "restrict_oom_score_adj"}, true},
		{[]string{"plugins", cri, "netns_mounts_under_state_dir"}, true},
		{[]string{"plugins", cri, "cni", "bin_dir"}, "/usr/lib/cni"},
		{[]string{"plugins", cri, "cni", "conf_dir"}, testParams.cniConfDir},
		{[]string{"plugins", cri, "containerd", "runtimes", "runc", "options", "Root"}, testParams.runcRoot},
		{[]string{"plugins", cri, "registry", "config_path"}, testParams.certsDir},
		{[]string{"plugins", "io.containerd.internal.v1.opt", "path"}, testParams.optDir},
		{[]string{"plugins", cri, "containerd", "snapshotter"}, "overlayfs"},
		// 1.6 has no background stats reader: its key of that name is the
		// snapshot stats period, in seconds, and stays.
		{[]string{"plugins", cri, "stats_collect_period"}, int64(10)},
	} {
		if diff := cmp.Diff(c.want, lookup(t, doc, c.path...)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", strings.Join(c.path, "."), diff)
		}
	}
}

func TestPatchConfigKeepsContainerdStatsPeriod(t *testing.T) {
	b, err := os.ReadFile("testdata/containerd-v2.4.2-default.toml")
	if err != nil {
		t.Fatal(err)
	}
	p := testParams
	p.statsCollectPeriod = ContainerdStatsCollectPeriod
	out, err := patchConfig(b, p)
	if err != nil {
		t.Fatalf("patchConfig: %v", err)
	}
	var doc map[string]any
	if err := toml.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, doc, "plugins", "io.containerd.cri.v1.runtime", "stats_collect_period"); got != "" {
		t.Errorf("stats_collect_period = %#v, want containerd's default ''", got)
	}
}

func TestOptionsStatsCollectPeriod(t *testing.T) {
	for _, c := range []struct {
		in, want, wantErr string
	}{
		{"", DefaultStatsCollectPeriod, ""},
		{ContainerdStatsCollectPeriod, ContainerdStatsCollectPeriod, ""},
		{"1m", "1m", ""},
		{"0s", "", "want a positive duration"},
		{"10", "", "want a positive duration"},
	} {
		o, err := Options{Flavour: Containerd2, RepoDir: t.TempDir(), StatsCollectPeriod: c.in}.withDefaults()
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: %v, want an error containing %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || o.StatsCollectPeriod != c.want {
			t.Errorf("%q: %q, %v; want %q", c.in, o.StatsCollectPeriod, err, c.want)
		}
	}
}

func TestPatchConfigRejectsUnknownLayouts(t *testing.T) {
	for _, c := range []struct {
		name, config, wantErr string
	}{
		{"no version", "root = '/x'\n", "no integer version"},
		{"old version", "version = 1\n", "unsupported containerd config version 1"},
		{"renamed table", "version = 3\n[plugins]\n[plugins.'io.containerd.server.v1.grpc']\naddress = ''\n", "default config has no table"},
		{"not toml", "version = = 3\n", "parse default config"},
		{"renamed key", "version = 3\n[plugins]\n[plugins.'io.containerd.server.v1.grpc']\n[plugins.'io.containerd.server.v1.ttrpc']\n" +
			"[plugins.'io.containerd.cri.v1.images']\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n[plugins.'io.containerd.cri.v1.images'.registry]\n" +
			"[plugins.'io.containerd.transfer.v1.local']\n[plugins.'io.containerd.cri.v1.runtime']\n[plugins.'io.containerd.cri.v1.runtime'.cni]\n" +
			"[plugins.'io.containerd.cri.v1.runtime'.containerd]\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes]\n" +
			"[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n" +
			"[plugins.'io.containerd.internal.v1.opt']\n[plugins.'io.containerd.nri.v1.nri']\n[plugins.'io.containerd.shim.v1.manager']\n",
			"default config has no key plugins.io.containerd.cri.v1.runtime.stats_collect_period"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := patchConfig([]byte(c.config), testParams)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("patchConfig: %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}

func TestCNIConfList(t *testing.T) {
	b, err := cniConfList("localcri-abc123", "lcri-abc123", "/run/localcri/abc123/cni/ipam", netip.MustParsePrefix("10.100.7.0/24"), false)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
		Plugins    []struct {
			Type      string `json:"type"`
			Bridge    string `json:"bridge"`
			IsGateway bool   `json:"isGateway"`
			IPMasq    bool   `json:"ipMasq"`
			IPAM      struct {
				Type    string `json:"type"`
				DataDir string `json:"dataDir"`
				Ranges  [][]struct {
					Subnet  string `json:"subnet"`
					Gateway string `json:"gateway"`
				} `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatalf("conflist does not parse: %v", err)
	}
	var types []string
	for _, p := range conf.Plugins {
		types = append(types, p.Type)
	}
	if diff := cmp.Diff([]string{"bridge", "portmap", "loopback"}, types); diff != "" {
		t.Errorf("plugins (-want +got):\n%s", diff)
	}
	br := conf.Plugins[0]
	if conf.Name != "localcri-abc123" || br.Bridge != "lcri-abc123" || !br.IsGateway || br.IPMasq {
		t.Errorf("network %q bridge %q gateway %t masquerade %t", conf.Name, br.Bridge, br.IsGateway, br.IPMasq)
	}
	if br.IPAM.Type != "host-local" || br.IPAM.DataDir != "/run/localcri/abc123/cni/ipam" ||
		br.IPAM.Ranges[0][0].Subnet != "10.100.7.0/24" || br.IPAM.Ranges[0][0].Gateway != "10.100.7.1" {
		t.Errorf("ipam = %+v", br.IPAM)
	}
	if strings.Contains(string(b), "routes") {
		t.Errorf("a default route without DefaultRoute:\n%s", b)
	}
	routed, err := cniConfList("localcri-abc123", "lcri-abc123", "/run/localcri/abc123/cni/ipam", netip.MustParsePrefix("10.100.7.0/24"), true)
	if err != nil {
		t.Fatal(err)
	}
	var withRoute struct {
		Plugins []struct {
			IPAM struct {
				Routes []struct {
					Dst string `json:"dst"`
				} `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(routed, &withRoute); err != nil {
		t.Fatal(err)
	}
	if r := withRoute.Plugins[0].IPAM.Routes; len(r) != 1 || r[0].Dst != "0.0.0.0/0" {
		t.Errorf("routes with DefaultRoute = %+v, want the default route", r)
	}
}

func TestHostsTOML(t *testing.T) {
	var doc map[string]any
	if err := toml.Unmarshal(hostsTOML("127.0.0.1:5000"), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["server"] != "http://127.0.0.1:5000" {
		t.Errorf("server = %v", doc["server"])
	}
	host := lookup(t, doc, "host", "http://127.0.0.1:5000").(map[string]any)
	if diff := cmp.Diff([]any{"pull", "resolve"}, host["capabilities"]); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
}
