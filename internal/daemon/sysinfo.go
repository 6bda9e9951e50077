// What the node says of its machine, kernel and container runtime: the
// kubelet's NodeSystemInfo, read as cadvisor reads it for the kubelet.

package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine"
)

// systemFiles are where the machine's identity is read, under a root ("/"
// on the machine, a directory in tests).
var systemFiles = struct {
	osRelease, osReleaseAlt, machineID, machineIDAlt, bootID, productUUID string
}{
	osRelease: "etc/os-release", osReleaseAlt: "usr/lib/os-release",
	machineID: "etc/machine-id", machineIDAlt: "var/lib/dbus/machine-id",
	bootID:      "proc/sys/kernel/random/boot_id",
	productUUID: "sys/class/dmi/id/product_uuid",
}

// readSystemInfo reads the machine's identity under root and kernel, the
// kubelet's NodeSystemInfo less the runtime's version (runtimeVersion). A
// file that cannot be read leaves its field empty, as the kubelet does.
func readSystemInfo(root, kernel string) engine.SystemInfo {
	read := func(paths ...string) string {
		for _, p := range paths {
			if b, err := os.ReadFile(filepath.Join(root, p)); err == nil {
				return strings.TrimSpace(string(b))
			}
		}
		return ""
	}
	info := engine.SystemInfo{
		MachineID:       read(systemFiles.machineID, systemFiles.machineIDAlt),
		SystemUUID:      read(systemFiles.productUUID),
		BootID:          read(systemFiles.bootID),
		KernelVersion:   kernel,
		OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH,
	}
	for _, p := range []string{systemFiles.osRelease, systemFiles.osReleaseAlt} {
		if b, err := os.ReadFile(filepath.Join(root, p)); err == nil {
			info.OSImage = osImage(b)
			break
		}
	}
	return info
}

// prettyName is cadvisor's match of the OS image in os-release.
var prettyName = regexp.MustCompile(`(PRETTY_NAME)=(.*)`)

// osImage is the OS image of an os-release file as cadvisor reads it for
// the kubelet: PRETTY_NAME without its quotes, "Linux" without one.
func osImage(osRelease []byte) string {
	if m := prettyName.FindSubmatch(osRelease); m != nil {
		return strings.Trim(string(m[2]), `"`)
	}
	return "Linux"
}

// runtimeVersioner is the runtime's CRI Version.
type runtimeVersioner interface {
	Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error)
}

// runtimeVersion is the runtime's name and version as the kubelet writes
// them in NodeSystemInfo: "containerd://2.1.4".
func runtimeVersion(ctx context.Context, rt runtimeVersioner) (string, error) {
	v, err := rt.Version(ctx, "v1")
	if err != nil {
		return "", fmt.Errorf("runtime version: %w", err)
	}
	return v.GetRuntimeName() + "://" + v.GetRuntimeVersion(), nil
}
