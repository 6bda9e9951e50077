package localcri

import (
	"fmt"
	"os"
	"path/filepath"
)

// Flavour selects which containerd an instance runs.
type Flavour string

const (
	// Containerd2 is containerd v2.4.2 (Containerd2Version), built from the
	// Go module proxy into <tools>/containerd-v2.4.2/bin on first use. It
	// serves CRI GetContainerEvents. Its config has version 3 or later.
	Containerd2 Flavour = "2"
	// Containerd16 is Debian's containerd 1.6 (/usr/bin/containerd). It
	// answers CRI GetContainerEvents with Unimplemented. Its config has
	// version 2.
	Containerd16 Flavour = "1.6"
)

// EnvFlavour is the environment variable FlavourFromEnv reads.
const EnvFlavour = "PODSYNC_CONTAINERD"

// Containerd2Version is the containerd release the Containerd2 flavour builds.
const Containerd2Version = "v2.4.2"

// CrictlVersion is the cri-tools release EnsureCrictl installs.
const CrictlVersion = "v1.37.0"

// FlavourFromEnv returns the flavour named by PODSYNC_CONTAINERD: "2" (also
// the default when unset or empty) or "1.6". Any other value is an error.
func FlavourFromEnv() (Flavour, error) {
	return ParseFlavour(os.Getenv(EnvFlavour))
}

// ParseFlavour parses "2" or "1.6"; the empty string means Containerd2.
func ParseFlavour(s string) (Flavour, error) {
	switch s {
	case "", "2":
		return Containerd2, nil
	case "1.6":
		return Containerd16, nil
	default:
		return "", fmt.Errorf("%s=%q: want %q or %q", EnvFlavour, s, Containerd2, Containerd16)
	}
}

// String returns a human name such as "containerd 1.6".
func (f Flavour) String() string {
	if f == Containerd2 {
		return "containerd " + Containerd2Version
	}
	return "containerd " + string(f)
}

// binaries are the executables of one flavour.
type binaries struct {
	containerd string
	ctr        string
	// shimDir holds containerd-shim-runc-v2; it goes first on containerd's PATH.
	shimDir string
}

// containerd2Dir is where the Containerd2 flavour's binaries live.
func containerd2Dir(toolsDir string) string {
	return filepath.Join(toolsDir, "containerd-"+Containerd2Version, "bin")
}

func flavourBinaries(f Flavour, toolsDir string) binaries {
	if f == Containerd2 {
		dir := containerd2Dir(toolsDir)
		return binaries{
			containerd: filepath.Join(dir, "containerd"),
			ctr:        filepath.Join(dir, "ctr"),
			shimDir:    dir,
		}
	}
	return binaries{containerd: "/usr/bin/containerd", ctr: "/usr/bin/ctr", shimDir: "/usr/bin"}
}
