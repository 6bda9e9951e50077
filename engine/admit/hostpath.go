package admit

import (
	"errors"
	"fmt"
	"path"
	"strings"

	psapi "k8s.io/pod-security-admission/api"
)

// HostPathPrefix is one allowed hostPath prefix: the operator's
// --allowed-host-paths PATH:ro or PATH:rw.
type HostPathPrefix struct {
	// Path is absolute and clean.
	Path string
	// ReadOnly mounts every hostPath below Path read-only, whatever the
	// pod's volumeMounts say.
	ReadOnly bool
}

// String is the prefix as the operator writes it: PATH:ro or PATH:rw.
func (h HostPathPrefix) String() string {
	if h.ReadOnly {
		return h.Path + ":ro"
	}
	return h.Path + ":rw"
}

// ParseHostPathPrefix parses PATH:ro or PATH:rw (the last colon separates
// the mode). A path without a mode is an error saying to add one: an
// operator upgrading from bare prefixes chooses, rather than getting
// read-write silently.
func ParseHostPathPrefix(s string) (HostPathPrefix, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 || (s[i+1:] != "ro" && s[i+1:] != "rw") {
		return HostPathPrefix{}, fmt.Errorf("%q: add :ro or :rw to say whether pods may write below it (e.g. %s:ro)", s, s)
	}
	p := s[:i]
	if !path.IsAbs(p) {
		return HostPathPrefix{}, fmt.Errorf("%q: want an absolute path", s)
	}
	return HostPathPrefix{Path: path.Clean(p), ReadOnly: s[i+1:] == "ro"}, nil
}

// DeniedHostPath is a path no hostPath volume may reach, whatever the
// allowed prefixes: podsync's root directory and store, the pod log
// directory, the runtime's root, state and socket.
type DeniedHostPath struct {
	// Path is absolute and clean.
	Path string
	// Why names what it is, for the refusal's message ("podsync's store
	// (--root-dir)").
	Why string
}

// ErrHostPathDenied is wrapped by CheckHostPath's error for a path that is,
// lies inside or contains a DeniedHostPath.
var ErrHostPathDenied = errors.New("denied host path")

// ErrHostPathNotAllowed is wrapped by CheckHostPath's error for a path
// under none of the allowed prefixes.
var ErrHostPathNotAllowed = errors.New("host path not allowed")

// HostPathAllowed reports whether a hostPath volume may use path: it is
// one of the allowed prefixes or below one, and neither is, lies inside
// nor contains a denied path. The comparison is lexical; the syncer
// checks the path it opens again by device and inode.
func (p Policy) HostPathAllowed(hostPath string) bool {
	_, err := p.CheckHostPath(hostPath)
	return err == nil
}

// CheckHostPath returns the allowed prefix a hostPath volume's path lies
// under (the longest one; "/" read-write at the privileged level when none
// is), or an error wrapping ErrHostPathNotAllowed or
// ErrHostPathDenied whose message names the prefixes or the denied path
// and why it is denied.
func (p Policy) CheckHostPath(hostPath string) (HostPathPrefix, error) {
	clean := path.Clean(hostPath)
	if !path.IsAbs(clean) {
		return HostPathPrefix{}, fmt.Errorf("%s is not an absolute path: %w", hostPath, ErrHostPathNotAllowed)
	}
	if d, rel, ok := p.DeniedFor(clean); ok {
		return HostPathPrefix{}, fmt.Errorf("%s %s %s, %s, which the node always refuses: %w", hostPath, rel, d.Path, d.Why, ErrHostPathDenied)
	}
	pre, ok := p.HostPathPrefixOf(clean)
	if !ok && p.level() == psapi.LevelPrivileged {
		// The privileged level allows hostPath anywhere but the denied
		// paths: read-write, resolved in the root.
		return HostPathPrefix{Path: "/"}, nil
	}
	if !ok {
		return HostPathPrefix{}, fmt.Errorf("%s is outside the node's allowed paths %v: %w", hostPath, p.AllowedHostPaths, ErrHostPathNotAllowed)
	}
	return pre, nil
}

// HostPathPrefixOf returns the longest allowed prefix that is clean path
// or an ancestor of it.
func (p Policy) HostPathPrefixOf(clean string) (HostPathPrefix, bool) {
	var best HostPathPrefix
	found := false
	for _, pre := range p.AllowedHostPaths {
		if within(clean, pre.Path) && (!found || len(pre.Path) > len(best.Path)) {
			best, found = pre, true
		}
	}
	return best, found
}

// DeniedFor returns the denied path that clean path is ("is"), or else
// lies inside ("lies inside"), or else contains ("contains"), with that
// relation: the most specific one, so that the store is named rather
// than the root directory holding it.
func (p Policy) DeniedFor(clean string) (DeniedHostPath, string, bool) {
	for _, rel := range []struct {
		name string
		is   func(d string) bool
	}{
		{"is", func(d string) bool { return clean == d }},
		{"lies inside", func(d string) bool { return within(clean, d) }},
		{"contains", func(d string) bool { return within(d, clean) }},
	} {
		for _, d := range p.DeniedHostPaths {
			if rel.is(d.Path) {
				return d, rel.name, true
			}
		}
	}
	return DeniedHostPath{}, "", false
}

// DeniedInside returns the denied paths that lie inside or are the
// allowed prefix pre: podsyncd warns of them at startup.
func (p Policy) DeniedInside(pre HostPathPrefix) []DeniedHostPath {
	var out []DeniedHostPath
	for _, d := range p.DeniedHostPaths {
		if within(d.Path, pre.Path) {
			out = append(out, d)
		}
	}
	return out
}

// within reports whether clean path p is dir or below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
