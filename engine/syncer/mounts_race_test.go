package syncer

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/host/mounttable"
)

// TestSubPathSwapRace is CVE-2017-1002101's attack: a container of the
// pod swaps a directory of a shared emptyDir and a symbolic link to /
// (renameat2 RENAME_EXCHANGE, as fast as it can) while the syncer mounts
// that directory as another container's subPath. Over 2,000 mounts, each
// either is refused or shows the volume's directory (by device and
// inode), never /: the syncer bind-mounts the descriptor it checked, not
// a path resolved again.
func TestSubPathSwapRace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test bind-mounts as the syncer does and needs root (CI runs the unit tests as root)")
	}
	root := t.TempDir()
	t.Cleanup(func() {
		if err := mounttable.UnmountBelow(root); err != nil {
			t.Error(err)
		}
	})
	s := &Syncer{cfg: criconfig.Options{RootDir: root}.WithDefaults()}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "race", UID: types.UID("race")}}
	vol := criconfig.VolumeDir(pod, criconfig.VolumePluginEmptyDir, "shared", s.cfg)
	dir, link := filepath.Join(vol, "d"), filepath.Join(vol, "alt")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", link); err != nil {
		t.Fatal(err)
	}
	var want, slash unix.Stat_t
	if err := unix.Stat(dir, &want); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat("/", &slash); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap: %v", err)
				return
			}
			// Let mounts through now and then, so that both outcomes
			// are exercised on a busy machine too.
			runtime.Gosched()
		}
	})
	defer func() { close(stop); wg.Wait() }()

	src := criconfig.MountSource{Container: "victim", Index: 0, SubPath: "d", VolumeDir: vol,
		Volume: &corev1.Volume{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	mounted, refused := 0, 0
	for i := range 2000 {
		r, err := s.resolveMount(pod, src)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidSpec) {
				t.Fatalf("mount %d: %v, want a refusal wrapping ErrInvalidSpec", i, err)
			}
			if refused++; refused == 1 {
				t.Logf("first refusal: %v", err)
			}
			continue
		}
		mounted++
		var got unix.Stat_t
		if err := unix.Stat(r.HostPath, &got); err != nil {
			t.Fatal(err)
		}
		if got.Dev == slash.Dev && got.Ino == slash.Ino {
			t.Fatalf("mount %d: %s shows the node's /", i, r.HostPath)
		}
		if got.Dev != want.Dev || got.Ino != want.Ino {
			t.Fatalf("mount %d: %s shows inode %d, not the volume's directory (%d)", i, r.HostPath, got.Ino, want.Ino)
		}
		if err := mounttable.UnmountAll(r.HostPath); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d mounts of the directory, %d refusals of the link", mounted, refused)
	if mounted == 0 {
		t.Fatal("no mount succeeded: the race was not exercised")
	}
}
