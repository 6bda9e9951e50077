package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine"
)

// TestOSImage: PRETTY_NAME without its quotes, as cadvisor reads it;
// "Linux" when os-release has none.
func TestOSImage(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"debian", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\n", "Debian GNU/Linux 12 (bookworm)"},
		{"not first", "NAME=\"Ubuntu\"\nVERSION=\"24.04 LTS\"\nPRETTY_NAME=\"Ubuntu 24.04 LTS\"\n", "Ubuntu 24.04 LTS"},
		{"unquoted", "PRETTY_NAME=Alpine Linux v3.20\n", "Alpine Linux v3.20"},
		{"none", "NAME=busybox\n", "Linux"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := osImage([]byte(tc.in)); got != tc.want {
				t.Errorf("osImage = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReadSystemInfo reads the machine's identity under a root, trimmed,
// with the fallbacks cadvisor has (/usr/lib/os-release,
// /var/lib/dbus/machine-id); what is missing stays empty.
func TestReadSystemInfo(t *testing.T) {
	write := func(t *testing.T, root, path, data string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("all", func(t *testing.T) {
		root := t.TempDir()
		write(t, root, "etc/os-release", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n")
		write(t, root, "etc/machine-id", "3d1219c7c4c5404aaa1f6d2a48adfda4\n")
		write(t, root, "proc/sys/kernel/random/boot_id", "3834f90e-e1b6-4f78-bff4-79fbb76efc09\n")
		write(t, root, "sys/class/dmi/id/product_uuid", "EC2C1B8A-0D4F-4E2B-8E1C-7A3F0A9B5C11\n")
		got := readSystemInfo(root, "6.1.0-18-amd64")
		want := engine.SystemInfo{
			MachineID: "3d1219c7c4c5404aaa1f6d2a48adfda4", SystemUUID: "EC2C1B8A-0D4F-4E2B-8E1C-7A3F0A9B5C11",
			BootID: "3834f90e-e1b6-4f78-bff4-79fbb76efc09", KernelVersion: "6.1.0-18-amd64",
			OSImage: "Debian GNU/Linux 12 (bookworm)", OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH,
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("readSystemInfo (-want +got):\n%s", d)
		}
	})
	t.Run("fallbacks and missing files", func(t *testing.T) {
		root := t.TempDir()
		write(t, root, "usr/lib/os-release", "PRETTY_NAME=\"Clear Linux OS\"\n")
		write(t, root, "var/lib/dbus/machine-id", "abc\n")
		got := readSystemInfo(root, "")
		want := engine.SystemInfo{MachineID: "abc", OSImage: "Clear Linux OS", OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("readSystemInfo (-want +got):\n%s", d)
		}
	})
}

// versionRuntime answers CRI Version.
type versionRuntime struct {
	resp *runtimeapi.VersionResponse
	err  error
}

func (r versionRuntime) Version(context.Context, string) (*runtimeapi.VersionResponse, error) {
	return r.resp, r.err
}

// TestRuntimeVersion: the runtime's name and version as the kubelet
// writes them in NodeSystemInfo.
func TestRuntimeVersion(t *testing.T) {
	got, err := runtimeVersion(t.Context(), versionRuntime{resp: &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "2.1.4"}})
	if err != nil || got != "containerd://2.1.4" {
		t.Errorf("runtimeVersion = %q, %v; want containerd://2.1.4", got, err)
	}
	down := errors.New("connection refused")
	if _, err := runtimeVersion(t.Context(), versionRuntime{err: down}); !errors.Is(err, down) {
		t.Errorf("runtimeVersion of a runtime that does not answer = %v, want it wrapped", err)
	}
}
