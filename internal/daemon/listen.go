package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Modes of the socket and of a parent directory Listen creates.
const (
	SocketMode    fs.FileMode = 0o660
	SocketDirMode fs.FileMode = 0o750
)

// Address is a parsed listen address.
type Address struct {
	// Network is "unix" or "tcp".
	Network string
	// Address is the socket path (unix) or host:port (tcp).
	Address string
}

// String returns the address as written: unix:///path or tcp://host:port.
func (a Address) String() string {
	if a.Network == "unix" {
		return "unix://" + a.Address
	}
	return "tcp://" + a.Address
}

// ParseAddress parses "unix:///absolute/path" or "tcp://host:port". A
// socket path is taken as written (cleaned), so it may hold any character.
func ParseAddress(addr string) (Address, error) {
	if p, ok := strings.CutPrefix(addr, "unix://"); ok {
		if !filepath.IsAbs(p) {
			return Address{}, fmt.Errorf("listen address %q: want unix:///absolute/path", addr)
		}
		return Address{Network: "unix", Address: filepath.Clean(p)}, nil
	}
	if hp, ok := strings.CutPrefix(addr, "tcp://"); ok {
		if strings.ContainsAny(hp, "/?#@") {
			return Address{}, fmt.Errorf("listen address %q: want tcp://host:port", addr)
		}
		if _, port, err := net.SplitHostPort(hp); err != nil || port == "" {
			return Address{}, fmt.Errorf("listen address %q: want tcp://host:port", addr)
		}
		return Address{Network: "tcp", Address: hp}, nil
	}
	return Address{}, fmt.Errorf("listen address %q: scheme must be unix:// or tcp://", addr)
}

// Listen listens on addr with the rules of sec:
//
//   - unix:///path: the parent directory is created (mode 0750) if missing
//     and refused if it is world-writable, where any user could replace
//     the socket; an existing socket file is removed if nothing listens on
//     it, and any other file there is refused; the socket gets mode 0660
//     and, with SocketGroup, that group, before anyone can connect to it
//     (it is made in a directory only podsyncd's user can enter, beside
//     path, and linked to path).
//   - tcp://host:port: only with TLS configured (the gRPC server then
//     requires and verifies client certificates); without it, only with
//     InsecureListenLoopback and a host that is, or resolves only to,
//     loopback addresses. Anything else is refused before listening.
func Listen(ctx context.Context, addr string, sec Security) (net.Listener, error) {
	a, err := ParseAddress(addr)
	if err != nil {
		return nil, err
	}
	if a.Network == "unix" {
		return listenUnix(ctx, a.Address, sec.SocketGroup)
	}
	hostPort, err := sec.tcpAddress(ctx, a)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", hostPort)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", a, err)
	}
	return l, nil
}

// tcpAddress decides whether a TCP address may be served and returns the
// host:port to listen on.
func (s Security) tcpAddress(ctx context.Context, a Address) (string, error) {
	if s.tlsConfigured() {
		return a.Address, s.checkTLSFiles()
	}
	if !s.InsecureListenLoopback {
		return "", fmt.Errorf("listen on %s: a TCP listener needs mTLS (--tls-cert-file, --tls-key-file, --tls-client-ca-file), or --insecure-listen-loopback for a loopback address", a)
	}
	host, port, err := net.SplitHostPort(a.Address)
	if err != nil {
		return "", fmt.Errorf("listen on %s: %w", a, err)
	}
	ip, err := loopbackIP(ctx, host)
	if err != nil {
		return "", fmt.Errorf("listen on %s: --insecure-listen-loopback: %w", a, err)
	}
	// Listen on the address checked, never on a name resolved again.
	return net.JoinHostPort(ip.String(), port), nil
}

// loopbackIP returns the loopback address host is or resolves to, or an
// error if host is empty (every interface) or any of its addresses is not
// loopback.
func loopbackIP(ctx context.Context, host string) (netip.Addr, error) {
	if host == "" {
		return netip.Addr{}, errors.New("an empty host means every interface; plaintext is allowed on loopback only")
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if ips, err = net.DefaultResolver.LookupNetIP(rctx, "ip", host); err != nil {
			return netip.Addr{}, fmt.Errorf("resolve %q: %w", host, err)
		}
	}
	if len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("%q has no address", host)
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return netip.Addr{}, fmt.Errorf("%s is not a loopback address; plaintext is allowed on loopback only", ip)
		}
	}
	return ips[0].Unmap(), nil
}

func listenUnix(ctx context.Context, path, group string) (_ net.Listener, err error) {
	gid := -1
	if group != "" {
		if gid, err = lookupGroup(group); err != nil {
			return nil, err
		}
	}
	if err := socketDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if len(path) >= maxSocketPath {
		return nil, fmt.Errorf("listen on unix://%s: the path is too long: a socket path has at most %d bytes; use a shorter path", path, maxSocketPath-1)
	}
	if err := removeStaleSocket(ctx, path); err != nil {
		return nil, err
	}
	// The socket is bound in a directory of its own that only podsyncd's
	// user can enter, given its mode and group there, and then linked
	// into place: no peer can connect to it before it has them, whatever
	// the umask (bind(2) gives a socket the umask's mode, 0777 under a
	// umask of 0, until the chmod). link(2), unlike rename(2), fails if
	// another process made a socket at path meanwhile, as bind(2) would.
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".ps")
	if err != nil {
		return nil, fmt.Errorf("listen on unix://%s: %w", path, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	bound := filepath.Join(tmp, "s")
	if len(bound) >= maxSocketPath {
		return nil, fmt.Errorf("listen on unix://%s: the path is too long: podsyncd makes the socket at %s first, and a socket path has at most %d bytes; use a shorter path",
			path, bound, maxSocketPath-1)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", bound)
	if err != nil {
		return nil, fmt.Errorf("listen on unix://%s: %w", path, err)
	}
	ul := l.(*net.UnixListener)
	// The listener would unlink the path it was bound at; the socket
	// listens at path, which Close removes if it still names it.
	ul.SetUnlinkOnClose(false)
	defer func() {
		if err != nil {
			_ = l.Close()
		}
	}()
	if err := os.Chmod(bound, SocketMode); err != nil {
		return nil, fmt.Errorf("socket unix://%s: %w", path, err)
	}
	if gid >= 0 {
		if err := os.Chown(bound, -1, gid); err != nil {
			return nil, fmt.Errorf("socket unix://%s: group %s: %w", path, group, err)
		}
	}
	fi, err := os.Lstat(bound)
	if err != nil {
		return nil, fmt.Errorf("socket unix://%s: %w", path, err)
	}
	if err := os.Link(bound, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("socket unix://%s: another process created it while podsyncd was starting (is another podsyncd starting?)", path)
		}
		return nil, fmt.Errorf("socket unix://%s: %w", path, err)
	}
	return &unixListener{UnixListener: ul, addr: &net.UnixAddr{Name: path, Net: "unix"}, file: fi}, nil
}

// maxSocketPath is the size of sockaddr_un's sun_path on Linux, the
// terminating NUL included.
const maxSocketPath = 108

// unixListener is a socket bound elsewhere and linked to addr.
type unixListener struct {
	*net.UnixListener
	addr *net.UnixAddr
	file fs.FileInfo // the socket, to tell it from a successor's
	once sync.Once
}

// Addr is the path the socket listens at.
func (l *unixListener) Addr() net.Addr { return l.addr }

// Close stops listening and removes the socket file, unless another
// socket (a successor podsyncd's) has replaced it.
func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if fi, serr := os.Lstat(l.addr.Name); serr == nil && os.SameFile(fi, l.file) {
			_ = os.Remove(l.addr.Name)
		}
	})
	return err
}

// socketDir creates dir (mode 0750) if missing and refuses it if it is
// not a directory, is writable by group or others, or is owned by another
// user than podsyncd's: whoever can write the directory can replace the
// socket.
func socketDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, SocketDirMode); err != nil {
			return fmt.Errorf("socket directory: %w", err)
		}
		// MkdirAll's mode is subject to the umask; make it exact.
		if err := os.Chmod(dir, SocketDirMode); err != nil {
			return fmt.Errorf("socket directory: %w", err)
		}
		fi, err = os.Stat(dir)
	}
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return fmt.Errorf("socket directory %s is world-writable (mode %#o): any user could replace the socket; use a directory only root can write to, such as /run/podsync", dir, fi.Mode().Perm())
	}
	if fi.Mode().Perm()&0o020 != 0 {
		return fmt.Errorf("socket directory %s is group-writable (mode %#o): the group's users could replace the socket; use a directory only podsyncd's user can write to (chmod g-w), such as /run/podsync", dir, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("socket directory %s is owned by uid %d, not podsyncd's uid %d: its owner could replace the socket; use a directory podsyncd's user owns, such as /run/podsync", dir, st.Uid, os.Geteuid())
	}
	return nil
}

// removeStaleSocket removes the socket file a previous podsyncd left at
// path. It refuses a path that is not a socket, and a socket something
// still listens on.
func removeStaleSocket(ctx context.Context, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket unix://%s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("socket unix://%s: a %s is in the way; refusing to remove what is not a socket", path, fileKind(fi.Mode()))
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(dctx, "unix", path)
	if err == nil {
		_ = c.Close()
		return fmt.Errorf("socket unix://%s: another process is listening on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("socket unix://%s: check whether it is in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket unix://%s: %w", path, err)
	}
	return nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return "file of mode " + m.Type().String()
}

// lookupGroup resolves a group name or gid.
func lookupGroup(group string) (int, error) {
	if gid, err := strconv.Atoi(group); err == nil {
		if gid < 0 {
			return 0, fmt.Errorf("--socket-group %q: gid must not be negative", group)
		}
		return gid, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, fmt.Errorf("--socket-group %q: %w", group, err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return 0, fmt.Errorf("--socket-group %q: gid %q: %w", group, g.Gid, err)
	}
	return gid, nil
}

// listenAll listens on every --listen address; if one fails, it closes
// the listeners it opened.
func listenAll(ctx context.Context, addrs []string, sec Security) ([]net.Listener, error) {
	listeners := make([]net.Listener, 0, len(addrs))
	for _, addr := range addrs {
		l, err := Listen(ctx, addr, sec)
		if err != nil {
			closeAll(listeners)
			return nil, err
		}
		listeners = append(listeners, l)
	}
	return listeners, nil
}

// closeAll closes listeners.
func closeAll(listeners []net.Listener) {
	for _, l := range listeners {
		_ = l.Close()
	}
}
