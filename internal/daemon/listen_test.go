package daemon_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/podsync/podsync/internal/daemon"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustListen(t *testing.T, addr string, sec daemon.Security) net.Listener {
	t.Helper()
	l, err := daemon.Listen(testContext(t), addr, sec)
	if err != nil {
		t.Fatalf("Listen(%s): %v", addr, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func wantErrorContaining(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

func TestListenUnixSocket(t *testing.T) {
	// A group name the node knows, if any, besides a bare gid.
	groups := []struct{ group, gid string }{{"4242", "4242"}}
	if g, err := user.LookupGroupId("1"); err == nil {
		groups = append(groups, struct{ group, gid string }{g.Name, g.Gid})
	}
	for _, g := range groups {
		t.Run("group "+g.group, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run", "podsync")
			path := filepath.Join(dir, "podsync.sock")
			l := mustListen(t, "unix://"+path, daemon.Security{SocketGroup: g.group})

			dfi, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if dfi.Mode().Perm() != 0o750 {
				t.Errorf("created directory mode %#o, want 0750", dfi.Mode().Perm())
			}
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o660 {
				t.Errorf("socket mode %v, want a socket with 0660", fi.Mode())
			}
			if gid := strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Gid), 10); gid != g.gid {
				t.Errorf("socket group %s, want %s", gid, g.gid)
			}
			if got := l.Addr().String(); got != path {
				t.Errorf("Addr %q, want %q", got, path)
			}
			// The directory the socket was made in is gone.
			if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
				t.Errorf("socket directory holds %v (%v), want the socket only", entries, err)
			}
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.Close()
			_ = l.Close()
			if _, err := os.Lstat(path); !os.IsNotExist(err) {
				t.Errorf("socket left behind after Close: %v", err)
			}
		})
	}
	t.Run("umask 0", func(t *testing.T) {
		// Under a umask of 0, bind(2) makes a socket anyone may connect
		// to until its chmod. The socket must appear at its path with
		// its mode already set: no change of its attributes follows its
		// creation there.
		dir := t.TempDir()
		path := filepath.Join(dir, "s.sock")
		w, err := fsnotify.NewWatcher()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = w.Close() }()
		if err := w.Add(dir); err != nil {
			t.Fatal(err)
		}
		old := syscall.Umask(0)
		defer syscall.Umask(old)
		mustListen(t, "unix://"+path, daemon.Security{})
		syscall.Umask(old)
		var created bool
		for done := false; !done; {
			select {
			case ev := <-w.Events:
				if ev.Name != path {
					continue
				}
				if ev.Has(fsnotify.Create) {
					created = true
				} else if created && ev.Has(fsnotify.Chmod) {
					t.Errorf("the socket's attributes changed after it appeared at its path (%s): it was reachable with the umask's mode", ev)
				}
			case err := <-w.Errors:
				t.Fatal(err)
			case <-time.After(200 * time.Millisecond):
				done = true
			}
		}
		if !created {
			t.Error("no creation of the socket seen")
		}
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o660 {
			t.Errorf("socket mode %#o, want 0660", fi.Mode().Perm())
		}
	})
	t.Run("Close keeps a successor's socket", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.sock")
		l := mustListen(t, "unix://"+path, daemon.Security{})
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		next, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = next.Close() }()
		_ = l.Close()
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("Close removed the socket another listener made: %v", err)
		}
	})
	t.Run("paths too long", func(t *testing.T) {
		// A directory of 101 bytes: a socket fits in it (dir/s is 103
		// bytes), the directory podsyncd makes it in does not.
		dir := t.TempDir()
		dir = filepath.Join(dir, strings.Repeat("d", 101-len(dir)-1))
		if err := os.Mkdir(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"s", strings.Repeat("s", 120)} {
			_, err := daemon.Listen(testContext(t), "unix://"+filepath.Join(dir, name), daemon.Security{})
			wantErrorContaining(t, err, "use a shorter path")
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Errorf("left behind %v (%v)", entries, err)
		}
	})
	t.Run("unknown group", func(t *testing.T) {
		_, err := daemon.Listen(testContext(t), "unix://"+filepath.Join(t.TempDir(), "s.sock"),
			daemon.Security{SocketGroup: "no-such-group-podsync"})
		wantErrorContaining(t, err, "--socket-group")
	})
}

func TestListenRefusesWorldWritableParent(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o777 | os.ModeSticky, 0o703} {
		t.Run(strings.ReplaceAll(mode.String(), "-", "_"), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "open")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "s.sock")
			_, err := daemon.Listen(testContext(t), "unix://"+path, daemon.Security{})
			wantErrorContaining(t, err, "world-writable")
			if _, err := os.Lstat(path); !os.IsNotExist(err) {
				t.Errorf("a socket was created: %v", err)
			}
		})
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	_ = old.Close() // what a crashed podsyncd leaves
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("no stale socket to test with: %v", err)
	}
	l := mustListen(t, "unix://"+path, daemon.Security{})
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial the new socket: %v", err)
	}
	_ = c.Close()

	// A live socket is another podsyncd's: refused.
	_, err = daemon.Listen(testContext(t), "unix://"+path, daemon.Security{})
	wantErrorContaining(t, err, "another process is listening")
	_ = l.Close()
}

func TestListenRefusesWhatIsNotASocket(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(path string) error
		kind string
	}{
		{"regular file", func(p string) error { return os.WriteFile(p, []byte("data"), 0o600) }, "regular file"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, "directory"},
		{"symlink", func(p string) error { return os.Symlink("/etc/hostname", p) }, "symbolic link"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.sock")
			if err := tt.make(path); err != nil {
				t.Fatal(err)
			}
			_, err := daemon.Listen(testContext(t), "unix://"+path, daemon.Security{})
			wantErrorContaining(t, err, tt.kind)
			if _, err := os.Lstat(path); err != nil {
				t.Errorf("the %s was removed: %v", tt.name, err)
			}
		})
	}
}

func TestListenTCP(t *testing.T) {
	t.Run("refused without TLS", func(t *testing.T) {
		_, err := daemon.Listen(testContext(t), "tcp://127.0.0.1:0", daemon.Security{})
		wantErrorContaining(t, err, "needs mTLS")
	})
	t.Run("TLS configured", func(t *testing.T) {
		sec := daemon.Security{TLSCertFile: "c.pem", TLSKeyFile: "k.pem", TLSClientCAFile: "ca.pem"}
		mustListen(t, "tcp://127.0.0.1:0", sec)
	})
	t.Run("partial TLS refused", func(t *testing.T) {
		_, err := daemon.Listen(testContext(t), "tcp://127.0.0.1:0", daemon.Security{TLSCertFile: "c.pem"})
		wantErrorContaining(t, err, "--tls-key-file")
	})
	insecure := daemon.Security{InsecureListenLoopback: true}
	for _, addr := range []string{"tcp://127.0.0.1:0", "tcp://[::1]:0", "tcp://localhost:0"} {
		t.Run("loopback "+addr, func(t *testing.T) {
			if strings.Contains(addr, "::1") && !hasIPv6Loopback() {
				t.Log("no ::1 on this machine; checking the address only")
				return
			}
			l := mustListen(t, addr, insecure)
			ap, err := netip.ParseAddrPort(l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			if !ap.Addr().IsLoopback() {
				t.Errorf("listening on %s, not loopback", ap)
			}
		})
	}
	// Only the address check runs: nothing listens off loopback.
	for _, addr := range []string{"tcp://192.0.2.10:7443", "tcp://0.0.0.0:7443", "tcp://:7443", "tcp://[::]:7443", "tcp://[::ffff:192.0.2.10]:7443"} {
		t.Run("not loopback "+addr, func(t *testing.T) {
			_, err := daemon.Listen(testContext(t), addr, insecure)
			wantErrorContaining(t, err, "loopback")
		})
	}
}

func hasIPv6Loopback() bool {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func TestParseAddress(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want daemon.Address
	}{
		{"unix:///run/podsync/podsync.sock", daemon.Address{Network: "unix", Address: "/run/podsync/podsync.sock"}},
		{"unix:///run//podsync/../podsync/x.sock", daemon.Address{Network: "unix", Address: "/run/podsync/x.sock"}},
		{"unix:///run/a#b?c.sock", daemon.Address{Network: "unix", Address: "/run/a#b?c.sock"}},
		{"tcp://127.0.0.1:7443", daemon.Address{Network: "tcp", Address: "127.0.0.1:7443"}},
		{"tcp://[::1]:7443", daemon.Address{Network: "tcp", Address: "[::1]:7443"}},
		{"tcp://node.example:7443", daemon.Address{Network: "tcp", Address: "node.example:7443"}},
	} {
		got, err := daemon.ParseAddress(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseAddress(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if got.String() == "" {
			t.Errorf("%q: empty String", tt.in)
		}
	}
	for _, bad := range []string{
		"", "/run/podsync.sock", "unix://relative.sock", "unix://host/path", "unix://", "tcp://127.0.0.1",
		"tcp://127.0.0.1:", "tcp://127.0.0.1:80/path", "http://127.0.0.1:80", "tcp://user@127.0.0.1:80",
	} {
		if _, err := daemon.ParseAddress(bad); err == nil {
			t.Errorf("ParseAddress(%q): no error", bad)
		}
	}
}

// TestListenRefusesASocketDirectoryOthersControl: a socket directory that
// the group can write, or that another user owns, is refused as a
// world-writable one is, and no socket is made.
func TestListenRefusesASocketDirectoryOthersControl(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode os.FileMode
		uid  int
		want string
	}{
		{name: "group-writable", mode: 0o770, uid: -1, want: "group-writable"},
		{name: "owned by another user", mode: 0o750, uid: 4242, want: "owned by uid 4242"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "socks")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			if tc.uid >= 0 {
				if os.Geteuid() != 0 {
					t.Fatal("the ownership row needs root (make test runs as root)")
				}
				if err := os.Chown(dir, tc.uid, -1); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "s.sock")
			_, err := daemon.Listen(testContext(t), "unix://"+path, daemon.Security{})
			wantErrorContaining(t, err, tc.want)
			if _, err := os.Lstat(path); !os.IsNotExist(err) {
				t.Errorf("a socket was created: %v", err)
			}
		})
	}
}
