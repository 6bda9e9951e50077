// What podsyncd reads of the machine it runs on: memory, the resolver
// configuration, the kernel and its security modules.

package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/syncer"
)

// machine computes what admission and the engine know of the host: its
// allocatable resources and its resolver configuration.
func (d *daemon) machine() error {
	reserved, err := d.cfg.Reserved()
	if err != nil {
		return err
	}
	mem, err := memTotal("/proc/meminfo")
	if err != nil {
		return err
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(d.cfg.MaxPods), resource.DecimalSI),
	}
	extended, err := d.cfg.Extended()
	if err != nil {
		return err
	}
	maps.Copy(capacity, extended)
	if d.policy.PriorityClasses, err = d.cfg.Priorities(); err != nil {
		return err
	}
	if d.cfg.ImageCredentials != "" {
		if d.credentials, err = readImageCredentials(d.cfg.ImageCredentials); err != nil {
			return err
		}
	}
	d.alloc = admit.Allocatable(capacity, reserved)
	d.memory = mem
	taints, err := d.cfg.Taints()
	if err != nil {
		return err
	}
	d.hooksFor = admit.Node{
		Allocatable: d.alloc, Capacity: capacity, KernelVersion: kernelRelease(), AppArmor: appArmorEnabled(),
		Name:   d.cfg.NodeName,
		Labels: admit.NodeLabels(d.cfg.NodeName, goruntime.GOOS, goruntime.GOARCH, d.cfg.NodeLabels),
		Taints: taints,
	}
	d.system = readSystemInfo("/", d.hooksFor.KernelVersion)
	d.log.Info("node", zap.Any("labels", d.hooksFor.Labels), zap.Strings("taints", d.cfg.NodeTaints),
		zap.String("osImage", d.system.OSImage), zap.String("kernelVersion", d.system.KernelVersion))
	cpu, memory := d.alloc[corev1.ResourceCPU], d.alloc[corev1.ResourceMemory]
	d.log.Info("allocatable", zap.String("cpu", cpu.String()), zap.String("memory", memory.String()),
		zap.Int("pods", d.cfg.MaxPods))
	d.log.Info("admission policy", zap.String("podSecurity", string(d.policy.Level)),
		zap.Bool("allowPrivileged", d.policy.AllowPrivileged), zap.Bool("allowHostNetwork", d.policy.AllowHostNetwork),
		zap.Bool("allowHostPID", d.policy.AllowHostPID), zap.Bool("allowHostIPC", d.policy.AllowHostIPC),
		zap.Stringers("allowedHostPaths", d.policy.AllowedHostPaths), zap.Strings("allowedCapabilities", d.policy.AllowedCapabilities),
		zap.Stringers("allowedHostPorts", d.policy.AllowedHostPorts), zap.Strings("allowedUnsafeSysctls", d.policy.AllowedUnsafeSysctls))
	if d.cfg.ResolvConf != "" {
		if d.hostDNS, err = readResolvConf(d.cfg.ResolvConf); err != nil {
			return err
		}
	}
	return nil
}

// readImageCredentials reads --image-credentials, a docker config.json.
func readImageCredentials(path string) (*syncer.Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--image-credentials: %w", err)
	}
	cfg, err := syncer.ParseDockerConfigJSON(data)
	if err != nil {
		return nil, fmt.Errorf("--image-credentials %s: %w; want a docker config.json ({\"auths\": {\"REGISTRY\": {\"auth\": \"BASE64(user:password)\"}}})", path, err)
	}
	k := &syncer.Keyring{}
	k.Add(cfg)
	return k, nil
}

// memTotal returns MemTotal of a /proc/meminfo file, in bytes.
func memTotal(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("machine memory: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		rest, ok := strings.CutPrefix(line, "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb <= 0 {
			break
		}
		if len(f) > 1 && f[1] != "kB" {
			break
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("machine memory: no MemTotal in %s", path)
}

// readResolvConf parses the nameserver, search and options lines of a
// resolv.conf file.
func readResolvConf(path string) (*runtimeapi.DNSConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--resolv-conf: %w", err)
	}
	cfg := &runtimeapi.DNSConfig{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			cfg.Servers = append(cfg.Servers, f[1])
		case "search", "domain":
			// The last search or domain line wins, as for the resolver.
			cfg.Searches = append([]string(nil), f[1:]...)
		case "options":
			cfg.Options = append(cfg.Options, f[1:]...)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--resolv-conf %s: %w", path, err)
	}
	return cfg, nil
}

// kernelRelease is the running kernel's release ("6.1.0-18-amd64"), which
// decides the safe sysctls; "" if unknown.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// appArmorEnabled reports whether the kernel enforces AppArmor, as the
// kubelet's check (github.com/opencontainers/runc/libcontainer/apparmor
// IsEnabled) reads it.
func appArmorEnabled() bool {
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && len(b) > 0 && b[0] == 'Y'
}
