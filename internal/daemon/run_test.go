package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/daemon"
)

// syncBuffer is a bytes.Buffer safe for the daemon's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// base are flags that keep a config valid on any host, and keep each run
// of the tests in a cgroup root of its own (unitCgroupRoot), which
// podsyncd claims.
var base = []string{"--node-name=node-a", "--node-ip=127.0.0.1", "--resolv-conf=", "--cgroup-root=" + unitCgroupRoot}

// unitCgroupRoot is this test process's cgroup root; TestMain removes it.
var unitCgroupRoot = fmt.Sprintf("/podsync-daemon-unit-%d", os.Getpid())

func TestLoadConfigDefaults(t *testing.T) {
	c, err := daemon.LoadConfig(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	if c.RuntimeEndpoint != daemon.DefaultRuntimeEndpoint || c.ImageEndpoint != daemon.DefaultRuntimeEndpoint {
		t.Errorf("endpoints = %q, %q; want both %q", c.RuntimeEndpoint, c.ImageEndpoint, daemon.DefaultRuntimeEndpoint)
	}
	if len(c.Listen) != 1 || c.Listen[0] != daemon.DefaultSocket {
		t.Errorf("listen = %q, want [%s]", c.Listen, daemon.DefaultSocket)
	}
	if c.RootDir != "/var/lib/podsync" || c.PodLogDir != "/var/log/pods" || c.ClusterDomain != "cluster.local" ||
		c.CgroupDriver != "cgroupfs" || c.MaxPods != 110 || c.ShutdownTimeout.Duration != 30*time.Second ||
		c.LogLevel != "info" || c.LogFormat != "json" {
		t.Errorf("defaults: %+v", c)
	}
	if c.Policy.AllowPrivileged || c.Policy.AllowHostNetwork || len(c.Policy.AllowedHostPaths) != 0 {
		t.Errorf("default policy is not the refusing one: %+v", c.Policy)
	}
	if p := c.Policy.Admit(); p.Level != "baseline" || len(p.AllowedHostPorts)+len(p.AllowedCapabilities)+len(p.AllowedUnsafeSysctls) != 0 {
		t.Errorf("default admission policy %+v, want baseline without exemptions", p)
	}
	if th, err := c.StoreThreshold(); c.HousekeepingInterval.Duration != 10*time.Second || err != nil ||
		th != (engine.StorageThreshold{Percent: 5}) {
		t.Errorf("housekeeping interval %s, store threshold %+v (%v); want 10s, 5%%", c.HousekeepingInterval.Duration, th, err)
	}
	if c.ManifestDir != "" || c.ManifestRescan.Duration != 20*time.Second {
		t.Errorf("manifest dir %q, rescan %s; want none, 20s", c.ManifestDir, c.ManifestRescan.Duration)
	}

	// Host-derived defaults.
	c, err = daemon.LoadConfig(t.Context(), []string{"--resolv-conf="})
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeName == "" || len(c.NodeIPs) != 1 {
		t.Errorf("node name %q, IPs %q: want the host's", c.NodeName, c.NodeIPs)
	}
}

func TestLoadConfigPrecedence(t *testing.T) {
	file := writeFile(t, "podsyncd.yaml", `
runtimeEndpoint: unix:///file/containerd.sock
rootDir: /file/root
clusterDomain: file.local
clusterDNS: [10.0.0.10]
maxPods: 20
shutdownTimeout: 5s
housekeepingInterval: 3s
evictionStoreMinAvailable: 2Gi
logLevel: debug
listen:
  - unix:///file/a.sock
  - unix:///file/b.sock
systemReserved:
  cpu: 500m
nodeLabels:
  disk: ssd
nodeTaints: ["dedicated=db:NoSchedule"]
policy:
  podSecurity: restricted
  allowHostNetwork: true
  allowedHostPaths: [/data:ro]
  allowedHostPorts: ["8000-8099"]
  allowedCapabilities: [NET_ADMIN]
  allowedUnsafeSysctls: ["kernel.msg*"]
security:
  roles:
    admin: ["uid:0"]
`)
	args := append([]string{"--config", file,
		"--root-dir=/flag/root", "--max-pods=30", "--listen=unix:///flag/c.sock",
		"--allowed-host-paths=/srv:rw", "--system-reserved=memory=1Gi", "--housekeeping-interval=4s"}, base...)
	c, err := daemon.LoadConfig(t.Context(), args)
	if err != nil {
		t.Fatal(err)
	}
	// From the file.
	if c.RuntimeEndpoint != "unix:///file/containerd.sock" || c.ImageEndpoint != c.RuntimeEndpoint {
		t.Errorf("endpoints = %q, %q", c.RuntimeEndpoint, c.ImageEndpoint)
	}
	if c.ClusterDomain != "file.local" || len(c.ClusterDNS) != 1 || c.LogLevel != "debug" ||
		c.ShutdownTimeout.Duration != 5*time.Second || !c.Policy.AllowHostNetwork ||
		len(c.Roles.Admin) != 1 {
		t.Errorf("file values lost: %+v", c)
	}
	// Flags override the file; a repeatable flag replaces the file's list.
	if th, err := c.StoreThreshold(); err != nil || th != (engine.StorageThreshold{Bytes: 2 << 30}) {
		t.Errorf("store threshold %+v (%v), want the file's 2Gi", th, err)
	}
	if c.RootDir != "/flag/root" || c.MaxPods != 30 || c.HousekeepingInterval.Duration != 4*time.Second {
		t.Errorf("rootDir %q, maxPods %d, housekeeping %s: flags must win", c.RootDir, c.MaxPods, c.HousekeepingInterval.Duration)
	}
	if fmt.Sprint(c.Listen) != "[unix:///flag/c.sock]" || fmt.Sprint(c.Policy.AllowedHostPaths) != "[/srv:rw]" {
		t.Errorf("listen %q, allowedHostPaths %q: the flags' lists must replace the file's", c.Listen, c.Policy.AllowedHostPaths)
	}
	if p := c.Policy.Admit(); p.Level != "restricted" || fmt.Sprint(p.AllowedHostPorts) != "[8000-8099]" ||
		fmt.Sprint(p.AllowedCapabilities) != "[NET_ADMIN]" || fmt.Sprint(p.AllowedUnsafeSysctls) != "[kernel.msg*]" || !p.AllowHostNetwork || p.AllowHostPID {
		t.Errorf("policy from the file: %+v", p)
	}
	if p := mustLoad(t, "--allow-host-namespaces").Policy.Admit(); !p.AllowHostNetwork || !p.AllowHostPID || !p.AllowHostIPC {
		t.Errorf("--allow-host-namespaces: %+v, want all three host namespaces exempted", p)
	}
	if fmt.Sprint(c.NodeLabels) != "map[disk:ssd]" {
		t.Errorf("nodeLabels = %v, want the file's", c.NodeLabels)
	}
	if taints, err := c.Taints(); err != nil || fmt.Sprint(taints) != "[{dedicated db NoSchedule <nil>}]" {
		t.Errorf("taints = %v (%v), want the file's", taints, err)
	}
	if c := mustLoad(t, "--node-labels=zone=a,disk=hdd", "--node-taints=a:NoExecute,b=1:NoSchedule"); fmt.Sprint(c.NodeLabels) != "map[disk:hdd zone:a]" ||
		fmt.Sprint(c.NodeTaints) != "[a:NoExecute b=1:NoSchedule]" {
		t.Errorf("--node-labels %v, --node-taints %v: want the flags'", c.NodeLabels, c.NodeTaints)
	}
	if fmt.Sprint(c.SystemReserved) != "map[memory:1Gi]" {
		t.Errorf("systemReserved = %v, want the flag's", c.SystemReserved)
	}
	// Defaults survive where neither says anything.
	if c.PodLogDir != daemon.DefaultPodLogDir || c.CgroupDriver != "cgroupfs" {
		t.Errorf("defaults lost: podLogDir %q, cgroupDriver %q", c.PodLogDir, c.CgroupDriver)
	}
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		file string // config file content, passed with --config
		args []string
		want []string // in stderr
	}{
		{name: "unknown flag", args: []string{"--bogus"}, want: []string{"unknown flag: --bogus"}},
		{name: "positional", args: []string{"run"}, want: []string{"unexpected arguments"}},
		{name: "cgroup driver", args: []string{"--cgroup-driver=cgroupv3"}, want: []string{`--cgroup-driver "cgroupv3"`}},
		{name: "cgroup root", args: []string{"--cgroup-root=podsync/../x"}, want: []string{`--cgroup-root "podsync/../x"`}},
		{name: "log level", args: []string{"--log-level=loud"}, want: []string{`--log-level "loud"`}},
		{name: "image pull verification policy", args: []string{"--image-pull-credentials-verification-policy=Sometimes"},
			want: []string{`--image-pull-credentials-verification-policy: image pull credential verification policy "Sometimes": want NeverVerify`}},
		{name: "allowlist without its policy", args: []string{"--preloaded-images-verification-allowlist=registry.example/app"},
			want: []string{"an allowlist of preloaded images needs the policy NeverVerifyAllowlistedImages"}},
		{name: "log format", args: []string{"--log-format=xml"}, want: []string{`--log-format "xml"`}},
		{name: "node ip", args: []string{"--node-ip=not-an-ip"}, want: []string{`--node-ip "not-an-ip"`}},
		{name: "cluster dns", args: []string{"--cluster-dns=1.2.3"}, want: []string{`--cluster-dns "1.2.3"`}},
		{name: "max pods", args: []string{"--max-pods=0"}, want: []string{"--max-pods 0"}},
		{name: "shutdown timeout", args: []string{"--shutdown-timeout=0s"}, want: []string{"--shutdown-timeout"}},
		{name: "housekeeping interval", args: []string{"--housekeeping-interval=0s"}, want: []string{"--housekeeping-interval 0s"}},
		{name: "store threshold percent", args: []string{"--eviction-store-min-available=120%"}, want: []string{`--eviction-store-min-available "120%"`}},
		{name: "store threshold quantity", args: []string{"--eviction-store-min-available=lots"}, want: []string{`--eviction-store-min-available "lots"`}},
		{name: "metrics on every interface", args: []string{"--metrics-address=:9090"}, want: []string{"not a loopback address", "--metrics-allow-remote"}},
		{name: "metrics on a public address", args: []string{"--metrics-address=192.0.2.1:9090"}, want: []string{"not a loopback address"}},
		{name: "reserved resource", args: []string{"--system-reserved=gpu=1"}, want: []string{"--system-reserved gpu"}},
		{name: "reserved quantity", args: []string{"--system-reserved=cpu=lots"}, want: []string{"--system-reserved cpu=lots"}},
		{name: "node label", args: []string{"--node-labels=bad key=v"}, want: []string{"--node-labels", `"bad key"`}},
		{name: "automatic node label", args: []string{"--node-labels=kubernetes.io/os=windows"}, want: []string{"--node-labels", "set by podsyncd itself"}},
		{name: "node taint effect", args: []string{"--node-taints=k=v:Sometimes"}, want: []string{"--node-taints", `"k=v:Sometimes"`, "NoSchedule, PreferNoSchedule or NoExecute"}},
		{name: "node taint without effect", file: "nodeTaints: [k=v]\n", want: []string{"--node-taints", "key[=value]:Effect"}},
		{name: "relative root", args: []string{"--root-dir=state"}, want: []string{`--root-dir "state"`}},
		{name: "relative manifest dir", args: []string{"--manifest-dir=manifests"}, want: []string{`--manifest-dir "manifests"`, "absolute"}},
		{name: "manifest rescan", args: []string{"--manifest-rescan=0s"}, want: []string{"--manifest-rescan 0s"}},
		{name: "host path without a mode", args: []string{"--allowed-host-paths=/srv/data"}, want: []string{`--allowed-host-paths "/srv/data"`, "add :ro or :rw"}},
		{name: "host path key without a mode", file: "policy:\n  allowedHostPaths: [/srv/data]\n", want: []string{"add :ro or :rw"}},
		{name: "runtime endpoint", args: []string{"--runtime-endpoint=/run/c.sock"}, want: []string{"--runtime-endpoint"}},
		{name: "tcp without tls", args: []string{"--listen=tcp://0.0.0.0:7443"}, want: []string{"needs mTLS"}},
		{name: "partial tls", args: []string{"--tls-cert-file=/c.pem"}, want: []string{"--tls-key-file"}},
		{name: "several errors", args: []string{"--max-pods=-1", "--log-format=xml"}, want: []string{"--max-pods -1", "--log-format"}},
		{name: "unknown key", file: "listen: [unix:///a.sock]\nmaxPodz: 3\n", want: []string{"--config", `unknown field "maxPodz"`}},
		{name: "bad yaml", file: "listen: [\n", want: []string{"--config"}},
		{name: "bad roles", file: "security:\n  roles:\n    admin: [\"uid:root\"]\n", want: []string{"roles.admin[0]"}},
		{name: "pod security level", args: []string{"--pod-security=strict"}, want: []string{`--pod-security "strict"`, "privileged, baseline or restricted"}},
		{name: "host port range", args: []string{"--allowed-host-ports=9000-80"}, want: []string{"--allowed-host-ports", `"9000-80"`}},
		{name: "host port", args: []string{"--allowed-host-ports=0"}, want: []string{"--allowed-host-ports", `"0"`}},
		{name: "capability", args: []string{"--allowed-capabilities=SYS ADMIN"}, want: []string{`--allowed-capabilities "SYS ADMIN"`}},
		{name: "unsafe sysctl not namespaced", args: []string{"--allowed-unsafe-sysctls=kernel.panic"}, want: []string{"--allowed-unsafe-sysctls", "kernel.panic", "not known to be namespaced"}},
		{name: "bad policy in the file", file: "policy:\n  podSecurity: open\n", want: []string{`--pod-security "open"`}},
		{name: "missing file", args: []string{"--config=/nonexistent/podsyncd.yaml"}, want: []string{"--config", "no such file"}},
		{name: "priority class value", args: []string{"--priority-classes=high=lots"}, want: []string{"--priority-classes", `"high"`, "not a 32-bit integer"}},
		{name: "priority class above the user range", args: []string{"--priority-classes=high=2000000000"}, want: []string{"--priority-classes", "above 1000000000"}},
		{name: "system priority class", file: "priorityClasses:\n  system-x: \"1\"\n", want: []string{"--priority-classes", "system-"}},
		{name: "extended resource name", args: []string{"--extended-resources=cpu=4"}, want: []string{"--extended-resources cpu", "example.com/foo"}},
		{name: "extended resource quantity", args: []string{"--extended-resources=example.com/foo=1.5"}, want: []string{"--extended-resources example.com/foo=1.5", "whole number"}},
		{name: "relative image credentials", args: []string{"--image-credentials=config.json"}, want: []string{`--image-credentials "config.json"`, "absolute path"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{}, base...), tt.args...)
			if tt.file != "" {
				args = append(args, "--config", writeFile(t, "c.yaml", tt.file))
			}
			var stdout, stderr bytes.Buffer
			if code := daemon.Run(t.Context(), args, &stdout, &stderr); code != daemon.ExitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, daemon.ExitUsage, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not name %q:\n%s", w, stderr.String())
				}
			}
			if !strings.HasPrefix(stderr.String(), "podsyncd: ") {
				t.Errorf("stderr does not start with podsyncd: %q", stderr.String())
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := daemon.Run(t.Context(), []string{"--help"}, &stdout, &stderr); code != daemon.ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	// The names operators, docs and deploy files rely on (issue 8, §7).
	for _, flag := range []string{"--runtime-endpoint", "--image-endpoint", "--listen", "--tls-cert-file",
		"--tls-key-file", "--tls-client-ca-file", "--tls-crl-file", "--insecure-listen-loopback", "--root-dir", "--pod-log-dir",
		"--node-name", "--node-ip", "--cluster-dns", "--cluster-domain", "--cgroup-driver", "--metrics-address",
		"--config", "--log-level", "--log-format", "--allow-privileged", "--allow-host-network", "--allow-host-pid",
		"--allow-host-ipc", "--allowed-host-paths", "--pod-security", "--allow-host-namespaces", "--allowed-host-ports",
		"--allowed-capabilities", "--allowed-unsafe-sysctls", "--system-reserved", "--max-pods", "--shutdown-timeout", "--node-labels", "--node-taints"} {
		if !strings.Contains(stdout.String(), flag+" ") {
			t.Errorf("--help does not list %s", flag)
		}
	}
	if _, err := daemon.LoadConfig(t.Context(), []string{"-h"}); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("LoadConfig(-h) = %v, want ErrHelp", err)
	}
}

// TestRunWithoutRuntime starts podsyncd against a runtime socket that does
// not exist: it must start and serve anyway, report NOT_SERVING and
// refuse calls with UNAVAILABLE, then shut down cleanly on cancel.
func TestRunWithoutRuntime(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "podsync.sock")
	root := filepath.Join(dir, "root")
	config := writeFile(t, "podsyncd.yaml", fmt.Sprintf(`
security:
  roles:
    admin: ["uid:%d"]
`, os.Getuid()))
	args := append([]string{
		"--config", config,
		"--runtime-endpoint=unix://" + filepath.Join(dir, "containerd.sock"),
		"--listen=unix://" + sock,
		"--root-dir=" + root,
		"--pod-log-dir=" + filepath.Join(dir, "logs"),
		"--metrics-address=127.0.0.1:0",
		"--shutdown-timeout=5s",
		"--log-level=debug",
	}, base...)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- daemon.Run(ctx, args, &stdout, &stderr) }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode().Type() == fs.ModeSocket {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("Run exited %d before serving; stderr:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("no socket at %s; stderr:\n%s", sock, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	for _, svc := range []string{"", "podsync.v1.PodSyncService"} {
		// The socket's file exists from bind(2) on, a moment before
		// listen(2) and its chmod: wait until it serves.
		resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{Service: svc}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("health %q: %v", svc, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("health %q = %v, want NOT_SERVING", svc, resp.GetStatus())
		}
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != daemon.SocketMode {
		t.Errorf("socket mode %#o, want %#o", fi.Mode().Perm(), daemon.SocketMode)
	}
	if fi, err := os.Stat(filepath.Join(root, daemon.StoreFile)); err != nil {
		t.Errorf("store: %v", err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("store mode %#o, want 0600", fi.Mode().Perm())
	}
	// Without TLS there is nothing to reload: SIGHUP (systemctl reload)
	// leaves podsyncd running rather than ending the process.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health after SIGHUP: %v", err)
	}
	_, err = podsyncv1.NewPodSyncServiceClient(conn).GetPod(cctx, &podsyncv1.GetPodRequest{Name: "web"})
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		t.Errorf("GetPod: %v, want UNAVAILABLE", err)
	}
	var reason string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.GetReason()
		}
	}
	if reason != errorinfo.ReasonRuntimeUnavailable {
		t.Errorf("GetPod reason %q, want %s", reason, errorinfo.ReasonRuntimeUnavailable)
	}
	_ = conn.Close()

	// The metrics endpoint serves the gRPC server's metrics.
	addr := metricsAddress(t, &stderr)
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), "grpc_server_handled_total") {
		t.Errorf("metrics: %s\n%.500s", resp.Status, body.String())
	}
	// The engine's metrics are registered; pods are described only while
	// a node runs.
	if !strings.Contains(body.String(), `podsync_sync_pass_duration_seconds_count{outcome="success"} 0`) ||
		strings.Contains(body.String(), "podsync_pods{") {
		t.Errorf("engine metrics without a runtime:\n%s", body.String())
	}

	start := time.Now()
	cancel()
	select {
	case code := <-done:
		if code != daemon.ExitOK {
			t.Errorf("exit %d, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Run did not return within 10s of cancel; stderr:\n%s", stderr.String())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("shutdown took %s, more than --shutdown-timeout", took)
	}
	for _, w := range []string{"waiting for the container runtime", "podsyncd stopped"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, stderr.String())
		}
	}
	// The runtime socket was never created: podsyncd only dials it.
	if _, err := os.Stat(filepath.Join(dir, "containerd.sock")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("runtime socket: %v", err)
	}
}

// metricsAddress finds the metrics listener's address in the log.
func metricsAddress(t *testing.T, log *syncBuffer) string {
	t.Helper()
	for line := range strings.Lines(log.String()) {
		if !strings.Contains(line, `"serving metrics"`) {
			continue
		}
		_, rest, ok := strings.Cut(line, `"address":"`)
		if !ok {
			break
		}
		addr, _, _ := strings.Cut(rest, `"`)
		return addr
	}
	t.Fatalf("no metrics address in the log:\n%s", log.String())
	return ""
}

func TestRunStartupFailure(t *testing.T) {
	dir := t.TempDir()
	// A regular file where the socket goes: Listen refuses to remove it.
	sock := filepath.Join(dir, "podsync.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--runtime-endpoint=unix://" + filepath.Join(dir, "containerd.sock"),
		"--listen=unix://" + sock,
		"--root-dir=" + filepath.Join(dir, "root"),
	}, base...)
	var stdout, stderr syncBuffer
	if code := daemon.Run(t.Context(), args, &stdout, &stderr); code != daemon.ExitFailure {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, daemon.ExitFailure, stderr.String())
	}
	if !strings.Contains(stderr.String(), "refusing to remove what is not a socket") {
		t.Errorf("stderr lacks the reason:\n%s", stderr.String())
	}
}

// TestRunCorruptStore: a corrupt store file makes podsyncd exit 1 before
// it looks at the runtime, naming the file, what was found and the flags
// that override, and leaving the file as it is; with --adopt-runtime the
// file is moved aside, unchanged, and podsyncd starts on a new store.
func TestRunCorruptStore(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, daemon.StoreFile)
	junk := bytes.Repeat([]byte("not a bbolt file\n"), 1024)
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "podsync.sock")
	args := append([]string{
		"--runtime-endpoint=unix://" + filepath.Join(dir, "containerd.sock"),
		"--listen=unix://" + sock,
		"--root-dir=" + root,
		"--pod-log-dir=" + filepath.Join(dir, "logs"),
	}, base...)
	var stdout, stderr syncBuffer
	if code := daemon.Run(t.Context(), args, &stdout, &stderr); code != daemon.ExitFailure {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, daemon.ExitFailure, stderr.String())
	}
	for _, want := range []string{path, "store file is corrupt", "no bbolt magic", "--adopt-runtime", "--remove-orphans"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, junk) {
		t.Errorf("the corrupt file was changed (%v)", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var adopt syncBuffer
	done := make(chan int, 1)
	go func() { done <- daemon.Run(ctx, append(args, "--adopt-runtime"), &stdout, &adopt) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode().Type() == fs.ModeSocket {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("Run --adopt-runtime exited %d; stderr:\n%s", code, adopt.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run --adopt-runtime does not serve; stderr:\n%s", adopt.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	aside, err := filepath.Glob(path + ".corrupt-*")
	if err != nil || len(aside) != 1 {
		t.Fatalf("moved-aside files %v (%v), want one", aside, err)
	}
	if got, err := os.ReadFile(aside[0]); err != nil || !bytes.Equal(got, junk) {
		t.Errorf("the moved-aside file is not the corrupt one (%v)", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("no new store at %s (%v)", path, err)
	}
	if !strings.Contains(adopt.String(), "corrupt store moved aside") {
		t.Errorf("stderr lacks the move:\n%s", adopt.String())
	}
}

func mustLoad(t *testing.T, args ...string) daemon.Config {
	t.Helper()
	c, err := daemon.LoadConfig(t.Context(), append(append([]string{}, base...), args...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRunBadImageCredentials: an --image-credentials file that is not a
// docker config.json stops podsyncd at start, naming the file and the
// format it wants.
func TestRunBadImageCredentials(t *testing.T) {
	dir := t.TempDir()
	creds := writeFile(t, "config.json", `{"auths": [`)
	args := append([]string{
		"--runtime-endpoint=unix://" + filepath.Join(dir, "containerd.sock"),
		"--listen=unix://" + filepath.Join(dir, "podsync.sock"),
		"--root-dir=" + filepath.Join(dir, "root"),
		"--image-credentials=" + creds,
	}, base...)
	var stdout, stderr syncBuffer
	if code := daemon.Run(t.Context(), args, &stdout, &stderr); code != daemon.ExitFailure {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, daemon.ExitFailure, stderr.String())
	}
	for _, want := range []string{"--image-credentials " + creds, "docker config.json"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
