package localcri

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// configParams are the per-instance values patched into containerd's
// default configuration.
type configParams struct {
	root, state, temp   string
	socket, ttrpcSocket string
	runcRoot            string
	shimSocketDir       string
	cniConfDir          string
	certsDir            string
	optDir              string
	sandboxImage        string
	// statsCollectPeriod is containerd 2.x's stats_collect_period;
	// ContainerdStatsCollectPeriod (or empty) leaves it unset.
	statsCollectPeriod string
}

// patchConfig takes the output of `containerd config default` (version 2 for
// containerd 1.6, version 3 or later for 2.x) and sets every key that keeps
// an instance apart from any other containerd on the machine, plus the CRI
// settings this machine needs (restrict_oom_score_adj, see shared/RUNTIME.md).
// Every table it writes into must exist in the default, so that a renamed
// key fails loudly instead of being ignored by containerd.
func patchConfig(defaults []byte, p configParams) ([]byte, error) {
	var cfg map[string]any
	if err := toml.Unmarshal(defaults, &cfg); err != nil {
		return nil, fmt.Errorf("parse default config: %w", err)
	}
	version, ok := cfg["version"].(int64)
	if !ok {
		return nil, fmt.Errorf("default config has no integer version")
	}
	// sets must find their tables in the default; known their keys too.
	var sets, known []setting
	common := []setting{
		{[]string{"root"}, p.root},
		{[]string{"state"}, p.state},
		{[]string{"temp"}, p.temp},
		{[]string{"imports"}, []any{}},
	}
	switch {
	case version == 2:
		const cri = "io.containerd.grpc.v1.cri"
		sets = []setting{
			{[]string{"grpc", "address"}, p.socket},
			{[]string{"ttrpc", "address"}, p.ttrpcSocket},
			{[]string{"plugins", cri, "sandbox_image"}, p.sandboxImage},
			{[]string{"plugins", cri, "restrict_oom_score_adj"}, true},
			{[]string{"plugins", cri, "netns_mounts_under_state_dir"}, true},
			{[]string{"plugins", cri, "cni", "bin_dir"}, cniBinDir},
			{[]string{"plugins", cri, "cni", "conf_dir"}, p.cniConfDir},
			{[]string{"plugins", cri, "containerd", "runtimes", "runc", "options", "Root"}, p.runcRoot},
			{[]string{"plugins", cri, "registry", "config_path"}, p.certsDir},
			{[]string{"plugins", "io.containerd.internal.v1.opt", "path"}, p.optDir},
		}
	case version >= 3:
		const (
			images  = "io.containerd.cri.v1.images"
			runtime = "io.containerd.cri.v1.runtime"
		)
		sets = []setting{
			{[]string{"plugins", "io.containerd.server.v1.grpc", "address"}, p.socket},
			{[]string{"plugins", "io.containerd.server.v1.ttrpc", "address"}, p.ttrpcSocket},
			{[]string{"plugins", images, "pinned_images", "sandbox"}, p.sandboxImage},
			{[]string{"plugins", images, "registry", "config_path"}, p.certsDir},
			{[]string{"plugins", "io.containerd.transfer.v1.local", "config_path"}, p.certsDir},
			{[]string{"plugins", runtime, "restrict_oom_score_adj"}, true},
			{[]string{"plugins", runtime, "netns_mounts_under_state_dir"}, true},
			{[]string{"plugins", runtime, "cni", "bin_dirs"}, []any{cniBinDir}},
			{[]string{"plugins", runtime, "cni", "conf_dir"}, p.cniConfDir},
			{[]string{"plugins", runtime, "containerd", "runtimes", "runc", "options", "Root"}, p.runcRoot},
			{[]string{"plugins", "io.containerd.internal.v1.opt", "path"}, p.optDir},
			// NRI listens on a machine-wide socket by default.
			{[]string{"plugins", "io.containerd.nri.v1.nri", "disable"}, true},
			{[]string{"plugins", "io.containerd.shim.v1.manager", "socket_dir"}, p.shimSocketDir},
		}
		if p.statsCollectPeriod != "" && p.statsCollectPeriod != ContainerdStatsCollectPeriod {
			// The CRI plugin's background stats reader (see
			// Options.StatsCollectPeriod). The key itself must be in the
			// default: a containerd without it would ignore it.
			known = append(known, setting{[]string{"plugins", runtime, "stats_collect_period"}, p.statsCollectPeriod})
		}
	default:
		return nil, fmt.Errorf("unsupported containerd config version %d", version)
	}
	for _, s := range append(common, sets...) {
		if err := setKey(cfg, s.path, s.value, false); err != nil {
			return nil, err
		}
	}
	for _, s := range known {
		if err := setKey(cfg, s.path, s.value, true); err != nil {
			return nil, err
		}
	}
	out, err := toml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return out, nil
}

// setting is one key to set, as its path of table names.
type setting struct {
	path  []string
	value any
}

// setKey sets path to value in cfg; every table on the way must exist, and
// with known the key too.
func setKey(cfg map[string]any, path []string, value any, known bool) error {
	m := cfg
	for i, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return fmt.Errorf("default config has no table %s", strings.Join(path[:i+1], "."))
		}
		m = next
	}
	if _, ok := m[path[len(path)-1]]; known && !ok {
		return fmt.Errorf("default config has no key %s", strings.Join(path, "."))
	}
	m[path[len(path)-1]] = value
	return nil
}

// cniConfList is the instance's CNI network: a bridge with host-local IPAM
// in the instance's own data dir, portmap, and loopback. It sets no
// masquerading, and no default route unless defaultRoute: pods reach only
// their subnet, or with it what the host routes them to.
func cniConfList(network, bridge, ipamDir string, subnet netip.Prefix, defaultRoute bool) ([]byte, error) {
	gw := subnet.Addr().Next()
	ipam := map[string]any{
		"type":    "host-local",
		"dataDir": ipamDir,
		"ranges": []any{[]any{map[string]any{
			"subnet":  subnet.String(),
			"gateway": gw.String(),
		}}},
	}
	if defaultRoute {
		ipam["routes"] = []any{map[string]any{"dst": "0.0.0.0/0"}}
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       network,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam":        ipam,
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
			map[string]any{"type": "loopback"},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode cni config: %w", err)
	}
	return b, nil
}

// hostsTOML is a containerd hosts.toml that sends pulls for one registry
// host to the local registry over plain HTTP.
func hostsTOML(registryAddr string) []byte {
	return fmt.Appendf(nil, `# Written by localcri: pull from the local registry over plain HTTP.
server = "http://%[1]s"

[host."http://%[1]s"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
`, registryAddr)
}

// writeConfig writes config.toml, the CNI conflist and the registry hosts
// files.
func (i *Instance) writeConfig(ctx context.Context, subnet netip.Prefix) error {
	for _, d := range []string{"root", "state", "tmp", "opt", "runc", "s", "cni/net.d", "cni/ipam", "certs.d"} {
		if err := os.MkdirAll(i.path(d), 0o711); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	defaults, err := runCommand(ctx, nil, "", i.bins.containerd, "config", "default")
	if err != nil {
		return fmt.Errorf("containerd config default: %w", err)
	}
	cfg, err := patchConfig(defaults, configParams{
		root:               i.path("root"),
		state:              i.path("state"),
		temp:               i.path("tmp"),
		socket:             i.rec.Socket,
		ttrpcSocket:        i.rec.Socket + ".ttrpc",
		runcRoot:           i.path("runc"),
		shimSocketDir:      i.path("s"),
		cniConfDir:         i.path("cni", "net.d"),
		certsDir:           i.path("certs.d"),
		optDir:             i.path("opt"),
		sandboxImage:       PauseImage,
		statsCollectPeriod: i.statsPeriod,
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(i.rec.ConfigPath, cfg, 0o644); err != nil {
		return fmt.Errorf("write containerd config: %w", err)
	}
	crictl := fmt.Sprintf("runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 60\n", i.Endpoint(), i.Endpoint())
	if err := os.WriteFile(i.path("crictl.yaml"), []byte(crictl), 0o644); err != nil {
		return fmt.Errorf("write crictl config: %w", err)
	}
	conflist, err := cniConfList(i.rec.Network, i.rec.Bridge, i.path("cni", "ipam"), subnet, i.defaultRoute)
	if err != nil {
		return err
	}
	if err := os.WriteFile(i.path("cni", "net.d", "10-localcri.conflist"), conflist, 0o644); err != nil {
		return fmt.Errorf("write cni config: %w", err)
	}
	for _, host := range []string{i.rec.RegistryAddr, "registry.local"} {
		d := i.path("certs.d", host)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create hosts dir: %w", err)
		}
		if err := os.WriteFile(filepath.Join(d, "hosts.toml"), hostsTOML(i.rec.RegistryAddr), 0o644); err != nil {
			return fmt.Errorf("write hosts.toml: %w", err)
		}
	}
	return nil
}
