package syncer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/criconfig"
)

// TestPodUserNamespace: a hostUsers false pod gets the lowest free slot
// of 65536 IDs above the host's first 65536, kept in its directory across
// calls (and restarts) and freed with it; a pod in the node's user
// namespace gets none.
func TestPodUserNamespace(t *testing.T) {
	s := &Syncer{cfg: criconfig.Options{RootDir: t.TempDir()}}
	pod := func(uid string, hostUsers *bool) *corev1.Pod {
		p := &corev1.Pod{}
		p.Name, p.Namespace, p.UID = uid, "ns", types.UID("uid-"+uid)
		p.Spec.HostUsers = hostUsers
		return p
	}
	mapping := func(host uint32) *runtimeapi.UserNamespace {
		id := []*runtimeapi.IDMapping{{HostId: host, ContainerId: 0, Length: 65536}}
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: id, Gids: id}
	}
	get := func(p *corev1.Pod) *runtimeapi.UserNamespace {
		t.Helper()
		u, err := s.podUserNamespace(p)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, hu := range []*bool{nil, ptr.To(true)} {
		if u := get(pod("host", hu)); u != nil {
			t.Errorf("hostUsers %v: user namespace %v, want none", hu, u)
		}
	}
	a, b := pod("a", ptr.To(false)), pod("b", ptr.To(false))
	if diff := cmp.Diff(mapping(65536), get(a), protocmp.Transform()); diff != "" {
		t.Errorf("first pod (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(mapping(131072), get(b), protocmp.Transform()); diff != "" {
		t.Errorf("second pod (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(mapping(65536), get(a), protocmp.Transform()); diff != "" {
		t.Errorf("first pod again (-want +got):\n%s", diff)
	}
	// A restarted podsync reads the allocations back.
	s2 := &Syncer{cfg: s.cfg}
	if u, err := s2.podUserNamespace(b); err != nil || u.GetUids()[0].GetHostId() != 131072 {
		t.Errorf("after a restart: %v, %v; want host 131072", u, err)
	}
	// The first pod's directory gone, its slot is the next pod's.
	if err := os.RemoveAll(criconfig.PodDir(a, s.cfg)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(mapping(65536), get(pod("c", ptr.To(false))), protocmp.Transform()); diff != "" {
		t.Errorf("pod after a removal (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(criconfig.PodDir(b, s.cfg), usernsFile)); err != nil {
		t.Errorf("allocation file: %v", err)
	}
	// The sandbox and the containers carry it.
	cfg, err := s.sandboxConfig(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(mapping(131072), cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(), protocmp.Transform()); diff != "" {
		t.Errorf("sandbox user namespace (-want +got):\n%s", diff)
	}
}

// TestSupportsUserNamespaces reads the default handler's feature, as
// containerd 2.x reports it; 1.6 reports no handlers.
func TestSupportsUserNamespaces(t *testing.T) {
	handler := func(name string, userns bool) *runtimeapi.RuntimeHandler {
		return &runtimeapi.RuntimeHandler{Name: name, Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: userns}}
	}
	for _, tc := range []struct {
		name     string
		handlers []*runtimeapi.RuntimeHandler
		want     bool
	}{
		{"no handlers (containerd 1.6)", nil, false},
		{"default handler with user namespaces", []*runtimeapi.RuntimeHandler{handler("", true), handler("runc", true)}, true},
		{"default handler without", []*runtimeapi.RuntimeHandler{handler("", false), handler("kata", true)}, false},
	} {
		if got := SupportsUserNamespaces(&runtimeapi.StatusResponse{RuntimeHandlers: tc.handlers}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
