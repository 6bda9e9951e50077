package syncer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/criconfig"
)

// The kubelet's user namespace allocation (pkg/kubelet/userns): each pod
// with hostUsers false gets 65536 host IDs of its own, container IDs 0 to
// 65535, in a slot of 65536 IDs above the host's first 65536; the
// allocation is kept in the pod's directory so that it survives a restart
// and is freed with the directory.
const (
	usernsLength   = 1 << 16
	usernsMaxSlots = 1 << 15 // host IDs up to 2^31
	usernsFile     = "userns"
)

// usernsMapping is the kubelet's userns file of a pod.
type usernsMapping struct {
	UIDMappings []idMapping `json:"uidMappings"`
	GIDMappings []idMapping `json:"gidMappings"`
}

type idMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

// wantsUserNamespace reports whether the pod runs in a user namespace of
// its own (hostUsers false).
func wantsUserNamespace(pod *corev1.Pod) bool {
	return pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
}

// podUserNamespace returns the CRI user namespace of pod: nil for a pod in
// the node's (hostUsers true or unset), else mode POD with the pod's
// mappings, allocated on first use.
func (s *Syncer) podUserNamespace(pod *corev1.Pod) (*runtimeapi.UserNamespace, error) {
	if !wantsUserNamespace(pod) {
		return nil, nil
	}
	s.usernsMu.Lock()
	defer s.usernsMu.Unlock()
	path := filepath.Join(criconfig.PodDir(pod, s.cfg), usernsFile)
	m, err := readUsernsMapping(path)
	if errors.Is(err, fs.ErrNotExist) {
		m, err = s.allocateUserns(path)
	}
	if err != nil {
		return nil, fmt.Errorf("user namespace of pod: %w", err)
	}
	toCRI := func(ms []idMapping) []*runtimeapi.IDMapping {
		out := make([]*runtimeapi.IDMapping, len(ms))
		for i, x := range ms {
			out[i] = &runtimeapi.IDMapping{HostId: x.HostID, ContainerId: x.ContainerID, Length: x.Length}
		}
		return out
	}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: toCRI(m.UIDMappings), Gids: toCRI(m.GIDMappings)}, nil
}

func readUsernsMapping(path string) (usernsMapping, error) {
	var m usernsMapping
	data, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil || len(m.UIDMappings) != 1 || len(m.GIDMappings) != 1 {
		return m, fmt.Errorf("read %s: not a user namespace mapping", path)
	}
	return m, nil
}

// allocateUserns takes the lowest slot no pod directory's userns file
// holds and records it at path. The caller holds usernsMu.
func (s *Syncer) allocateUserns(path string) (usernsMapping, error) {
	used := map[uint32]bool{}
	files, _ := filepath.Glob(filepath.Join(s.cfg.WithDefaults().RootDir, "pods", "*", usernsFile))
	for _, f := range files {
		if m, err := readUsernsMapping(f); err == nil {
			used[m.UIDMappings[0].HostID/usernsLength] = true
		}
	}
	for slot := uint32(1); slot < usernsMaxSlots; slot++ {
		if used[slot] {
			continue
		}
		id := []idMapping{{HostID: slot * usernsLength, ContainerID: 0, Length: usernsLength}}
		m := usernsMapping{UIDMappings: id, GIDMappings: id}
		data, err := json.Marshal(m)
		if err != nil {
			return m, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return m, err
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return m, err
		}
		return m, os.Rename(tmp, path)
	}
	return usernsMapping{}, errors.New("every user namespace range is taken")
}

// sandboxConfig is criconfig.SandboxConfig with the pod's user namespace
// (podUserNamespace).
func (s *Syncer) sandboxConfig(pod *corev1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	cfg, err := criconfig.SandboxConfig(pod, attempt, s.cfg)
	if err != nil {
		return nil, err
	}
	u, err := s.podUserNamespace(pod)
	if err != nil {
		return nil, err
	}
	setUserNamespace(cfg.GetLinux().GetSecurityContext(), u)
	return cfg, nil
}

// setUserNamespace puts u in a sandbox's or container's namespace options.
func setUserNamespace(sc interface {
	GetNamespaceOptions() *runtimeapi.NamespaceOption
}, u *runtimeapi.UserNamespace) {
	if u == nil {
		return
	}
	if ns := sc.GetNamespaceOptions(); ns != nil {
		ns.UsernsOptions = u
	}
}

// SupportsUserNamespaces reports whether the runtime's default handler
// runs pods in user namespaces of their own: the user_namespaces feature
// of its RuntimeStatus (containerd 2.x sets it when the kernel and its
// file systems have idmap mounts; 1.6 reports no handlers).
func SupportsUserNamespaces(status *runtimeapi.StatusResponse) bool {
	for _, h := range status.GetRuntimeHandlers() {
		if h.GetName() == "" {
			return h.GetFeatures().GetUserNamespaces()
		}
	}
	return false
}
